//! Tagging: categories, tags, and their associations with inventory
//! objects (`com.vmware.cis.tagging`).
//!
//! Objects are referred to by the SOAP side's [`ManagedObjectReference`].

use std::fmt;

use http::Method;
use serde::{Deserialize, Serialize};

use super::{DynamicId, LocalizableMessage, RestClient};
use crate::error::Error;
use crate::types::ManagedObjectReference;

const CATEGORY: &str = "cis/tagging/category";
const TAG: &str = "cis/tagging/tag";
const ASSOCIATION: &str = "cis/tagging/tag-association";

super::open_enum! {
    /// How many tags of a category an object may carry. Open: a value this
    /// crate does not know is kept as [`Cardinality::Unknown`].
    Cardinality {
        /// At most one tag of the category per object.
        Single = "SINGLE",
        /// Any number of tags of the category per object.
        Multiple = "MULTIPLE",
    }
}

/// A tag category.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Category {
    pub id: String,
    pub name: String,
    pub description: String,
    pub cardinality: Cardinality,
    /// Object types the category's tags can be attached to
    /// (`VirtualMachine`, `Datacenter`...); empty means all.
    pub associable_types: Vec<String>,
    pub used_by: Vec<String>,
}

/// What to create a category with.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct CategorySpec {
    pub name: String,
    pub description: String,
    pub cardinality: Cardinality,
    /// Empty: tags of the category can be attached to objects of any type.
    pub associable_types: Vec<String>,
}

impl CategorySpec {
    pub fn new(name: impl Into<String>, cardinality: Cardinality) -> Self {
        CategorySpec {
            name: name.into(),
            cardinality,
            ..Default::default()
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    pub fn associable_types<I, S>(mut self, types: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.associable_types = types.into_iter().map(Into::into).collect();
        self
    }
}

/// Changes to a category; `None` fields are left as they are. The server
/// only lets associable types grow, and cardinality go from single to
/// multiple.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct CategoryUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cardinality: Option<Cardinality>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associable_types: Option<Vec<String>>,
}

/// A tag.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Tag {
    pub id: String,
    pub name: String,
    pub description: String,
    pub category_id: String,
    pub used_by: Vec<String>,
}

/// What to create a tag with.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct TagSpec {
    pub name: String,
    pub description: String,
    pub category_id: String,
}

impl TagSpec {
    pub fn new(name: impl Into<String>, category_id: impl Into<String>) -> Self {
        TagSpec {
            name: name.into(),
            category_id: category_id.into(),
            ..Default::default()
        }
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

/// Changes to a tag; `None` fields are left as they are.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct TagUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The outcome of a batch association: the server applies what it can and
/// reports the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchResult {
    pub success: bool,
    pub error_messages: Vec<LocalizableMessage>,
}

impl Default for BatchResult {
    /// A success with no message (what a server that answers nothing means).
    fn default() -> Self {
        BatchResult {
            success: true,
            error_messages: Vec::new(),
        }
    }
}

/// The objects a tag is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AttachedObjects {
    pub tag_id: String,
    pub object_ids: Vec<ManagedObjectReference>,
}

/// The tags attached to an object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AttachedTags {
    pub object_id: ManagedObjectReference,
    pub tag_ids: Vec<String>,
}

#[derive(Deserialize)]
struct WireAttachedObjects {
    #[serde(default)]
    tag_id: String,
    #[serde(default)]
    object_ids: Option<Vec<DynamicId>>,
}

#[derive(Deserialize)]
struct WireAttachedTags {
    object_id: DynamicId,
    #[serde(default)]
    tag_ids: Option<Vec<String>>,
}

#[derive(Serialize)]
struct ObjectParam {
    object_id: DynamicId,
}

/// Tagging operations; from [`RestClient::tagging`].
#[derive(Clone, Copy)]
pub struct Tagging<'a> {
    client: &'a RestClient,
}

impl fmt::Debug for Tagging<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tagging")
            .field("client", self.client)
            .finish()
    }
}

impl<'a> Tagging<'a> {
    pub(super) fn new(client: &'a RestClient) -> Self {
        Tagging { client }
    }

    // ---- categories ----

    /// The ids of all categories.
    pub async fn list_categories(&self) -> Result<Vec<String>, Error> {
        let ids: Option<Vec<String>> = self
            .client
            .request("list categories", Method::GET, CATEGORY)
            .idempotent()
            .send()
            .await?;
        Ok(ids.unwrap_or_default())
    }

    /// One category.
    pub async fn get_category(&self, id: &str) -> Result<Category, Error> {
        self.client
            .request("get category", Method::GET, CATEGORY)
            .id(id)
            .idempotent()
            .send()
            .await
    }

    /// Every category, in full (one call per category, as the API offers no
    /// batch read).
    pub async fn categories(&self) -> Result<Vec<Category>, Error> {
        let mut categories = Vec::new();
        for id in self.list_categories().await? {
            categories.push(self.get_category(&id).await?);
        }
        Ok(categories)
    }

    /// The category with this id, or else this name. `Ok(None)` when there
    /// is none.
    pub async fn find_category(&self, name_or_id: &str) -> Result<Option<Category>, Error> {
        let categories = self.categories().await?;
        Ok(pick(categories, name_or_id, |c| (&c.id, &c.name)))
    }

    /// Creates a category; returns its id.
    pub async fn create_category(&self, spec: &CategorySpec) -> Result<String, Error> {
        self.client
            .request("create category", Method::POST, CATEGORY)
            .subject(&spec.name)
            .spec("create_spec", spec)
            .send()
            .await
    }

    /// Changes a category (name, description, cardinality, associable types).
    pub async fn update_category(&self, id: &str, update: &CategoryUpdate) -> Result<(), Error> {
        self.client
            .request("update category", Method::PATCH, CATEGORY)
            .id(id)
            .spec("update_spec", update)
            .idempotent()
            .send_unit()
            .await
    }

    /// Deletes a category and its tags.
    pub async fn delete_category(&self, id: &str) -> Result<(), Error> {
        self.client
            .request("delete category", Method::DELETE, CATEGORY)
            .id(id)
            .send_unit()
            .await
    }

    // ---- tags ----

    /// The ids of all tags.
    pub async fn list_tags(&self) -> Result<Vec<String>, Error> {
        let ids: Option<Vec<String>> = self
            .client
            .request("list tags", Method::GET, TAG)
            .idempotent()
            .send()
            .await?;
        Ok(ids.unwrap_or_default())
    }

    /// The ids of the tags of one category.
    pub async fn list_tags_for_category(&self, category_id: &str) -> Result<Vec<String>, Error> {
        #[derive(Serialize)]
        struct Param<'p> {
            category_id: &'p str,
        }
        let request = self
            .client
            .request("list tags for category", Method::POST, TAG)
            .rest_id(category_id)
            .action("list-tags-for-category");
        let request = match self.client.flavor() {
            super::ApiFlavor::Api => request.fields(&Param { category_id }),
            _ => request,
        };
        let ids: Option<Vec<String>> = request.idempotent().send().await?;
        Ok(ids.unwrap_or_default())
    }

    /// One tag.
    pub async fn get_tag(&self, id: &str) -> Result<Tag, Error> {
        self.client
            .request("get tag", Method::GET, TAG)
            .id(id)
            .idempotent()
            .send()
            .await
    }

    /// Every tag, in full.
    pub async fn tags(&self) -> Result<Vec<Tag>, Error> {
        let mut tags = Vec::new();
        for id in self.list_tags().await? {
            tags.push(self.get_tag(&id).await?);
        }
        Ok(tags)
    }

    /// Every tag of one category, in full.
    pub async fn tags_in_category(&self, category_id: &str) -> Result<Vec<Tag>, Error> {
        let mut tags = Vec::new();
        for id in self.list_tags_for_category(category_id).await? {
            tags.push(self.get_tag(&id).await?);
        }
        Ok(tags)
    }

    /// The tag with this id, or else this name (in `category`, a category
    /// id or name, when given). `Ok(None)` when there is none.
    pub async fn find_tag(
        &self,
        name_or_id: &str,
        category: Option<&str>,
    ) -> Result<Option<Tag>, Error> {
        let tags = match category {
            Some(category) => match self.find_category(category).await? {
                Some(category) => self.tags_in_category(&category.id).await?,
                None => return Ok(None),
            },
            None => self.tags().await?,
        };
        Ok(pick(tags, name_or_id, |t| (&t.id, &t.name)))
    }

    /// Creates a tag; returns its id.
    pub async fn create_tag(&self, spec: &TagSpec) -> Result<String, Error> {
        self.client
            .request("create tag", Method::POST, TAG)
            .subject(&spec.name)
            .spec("create_spec", spec)
            .send()
            .await
    }

    /// Changes a tag's name or description.
    pub async fn update_tag(&self, id: &str, update: &TagUpdate) -> Result<(), Error> {
        self.client
            .request("update tag", Method::PATCH, TAG)
            .id(id)
            .spec("update_spec", update)
            .idempotent()
            .send_unit()
            .await
    }

    /// Deletes a tag.
    pub async fn delete_tag(&self, id: &str) -> Result<(), Error> {
        self.client
            .request("delete tag", Method::DELETE, TAG)
            .id(id)
            .send_unit()
            .await
    }

    // ---- associations ----

    /// Attaches a tag to an object (a no-op when already attached).
    pub async fn attach(&self, tag_id: &str, object: &ManagedObjectReference) -> Result<(), Error> {
        self.client
            .request("attach tag", Method::POST, ASSOCIATION)
            .id(tag_id)
            .action("attach")
            .fields(&ObjectParam {
                object_id: object.into(),
            })
            .idempotent()
            .send_unit()
            .await
    }

    /// Detaches a tag from an object.
    pub async fn detach(&self, tag_id: &str, object: &ManagedObjectReference) -> Result<(), Error> {
        self.client
            .request("detach tag", Method::POST, ASSOCIATION)
            .id(tag_id)
            .action("detach")
            .fields(&ObjectParam {
                object_id: object.into(),
            })
            .idempotent()
            .send_unit()
            .await
    }

    /// Attaches one tag to many objects in one call.
    pub async fn attach_to_objects(
        &self,
        tag_id: &str,
        objects: &[ManagedObjectReference],
    ) -> Result<BatchResult, Error> {
        #[derive(Serialize)]
        struct Param {
            object_ids: Vec<DynamicId>,
        }
        let result: Option<BatchResult> = self
            .client
            .request("attach tag to objects", Method::POST, ASSOCIATION)
            .id(tag_id)
            .action("attach-tag-to-multiple-objects")
            .fields(&Param {
                object_ids: objects.iter().map(DynamicId::from).collect(),
            })
            .idempotent()
            .send()
            .await?;
        Ok(result.unwrap_or_default())
    }

    /// Attaches many tags to one object in one call.
    pub async fn attach_tags(
        &self,
        tag_ids: &[String],
        object: &ManagedObjectReference,
    ) -> Result<BatchResult, Error> {
        self.tags_on_object(
            "attach tags to object",
            "attach-multiple-tags-to-object",
            tag_ids,
            object,
        )
        .await
    }

    /// Detaches many tags from one object in one call.
    pub async fn detach_tags(
        &self,
        tag_ids: &[String],
        object: &ManagedObjectReference,
    ) -> Result<BatchResult, Error> {
        self.tags_on_object(
            "detach tags from object",
            "detach-multiple-tags-from-object",
            tag_ids,
            object,
        )
        .await
    }

    async fn tags_on_object(
        &self,
        operation: &'static str,
        action: &str,
        tag_ids: &[String],
        object: &ManagedObjectReference,
    ) -> Result<BatchResult, Error> {
        #[derive(Serialize)]
        struct Param<'p> {
            object_id: DynamicId,
            tag_ids: &'p [String],
        }
        let result: Option<BatchResult> = self
            .client
            .request(operation, Method::POST, ASSOCIATION)
            .action(action)
            .fields(&Param {
                object_id: object.into(),
                tag_ids,
            })
            .idempotent()
            .send()
            .await?;
        Ok(result.unwrap_or_default())
    }

    /// The ids of the tags attached to an object.
    pub async fn list_attached_tags(
        &self,
        object: &ManagedObjectReference,
    ) -> Result<Vec<String>, Error> {
        let ids: Option<Vec<String>> = self
            .client
            .request("list attached tags", Method::POST, ASSOCIATION)
            .action("list-attached-tags")
            .fields(&ObjectParam {
                object_id: object.into(),
            })
            .idempotent()
            .send()
            .await?;
        Ok(ids.unwrap_or_default())
    }

    /// The objects a tag is attached to.
    pub async fn list_attached_objects(
        &self,
        tag_id: &str,
    ) -> Result<Vec<ManagedObjectReference>, Error> {
        let request = self
            .client
            .request("list attached objects", Method::POST, ASSOCIATION)
            .id(tag_id)
            .action("list-attached-objects");
        // `/api` takes no body here; `/rest` servers (vcsim) want a JSON one.
        let request = match self.client.flavor() {
            super::ApiFlavor::Rest => request.fields(&serde_json::Map::new()),
            _ => request,
        };
        let ids: Option<Vec<DynamicId>> = request.idempotent().send().await?;
        Ok(ids
            .unwrap_or_default()
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// For each tag, the objects it is attached to, in one call.
    pub async fn list_attached_objects_on_tags(
        &self,
        tag_ids: &[String],
    ) -> Result<Vec<AttachedObjects>, Error> {
        #[derive(Serialize)]
        struct Param<'p> {
            tag_ids: &'p [String],
        }
        let found: Option<Vec<WireAttachedObjects>> = self
            .client
            .request("list attached objects on tags", Method::POST, ASSOCIATION)
            .action("list-attached-objects-on-tags")
            .fields(&Param { tag_ids })
            .idempotent()
            .send()
            .await?;
        Ok(found
            .unwrap_or_default()
            .into_iter()
            .map(|w| AttachedObjects {
                tag_id: w.tag_id,
                object_ids: w
                    .object_ids
                    .unwrap_or_default()
                    .into_iter()
                    .map(Into::into)
                    .collect(),
            })
            .collect())
    }

    /// For each object, the tags attached to it, in one call.
    pub async fn list_attached_tags_on_objects(
        &self,
        objects: &[ManagedObjectReference],
    ) -> Result<Vec<AttachedTags>, Error> {
        #[derive(Serialize)]
        struct Param {
            object_ids: Vec<DynamicId>,
        }
        let found: Option<Vec<WireAttachedTags>> = self
            .client
            .request("list attached tags on objects", Method::POST, ASSOCIATION)
            .action("list-attached-tags-on-objects")
            .fields(&Param {
                object_ids: objects.iter().map(DynamicId::from).collect(),
            })
            .idempotent()
            .send()
            .await?;
        Ok(found
            .unwrap_or_default()
            .into_iter()
            .map(|w| AttachedTags {
                object_id: w.object_id.into(),
                tag_ids: w.tag_ids.unwrap_or_default(),
            })
            .collect())
    }
}

/// The item whose id is `key`, else the first whose name is.
fn pick<T>(items: Vec<T>, key: &str, id_and_name: impl Fn(&T) -> (&String, &String)) -> Option<T> {
    let by_id = items.iter().position(|item| id_and_name(item).0 == key);
    let index = by_id.or_else(|| items.iter().position(|item| id_and_name(item).1 == key))?;
    items.into_iter().nth(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cardinality_is_open() {
        assert_eq!(
            serde_json::to_string(&Cardinality::Multiple).unwrap(),
            "\"MULTIPLE\""
        );
        let c: Cardinality = serde_json::from_str("\"SINGLE\"").unwrap();
        assert_eq!(c, Cardinality::Single);
        let c: Cardinality = serde_json::from_str("\"SOMETIMES\"").unwrap();
        assert_eq!(c, Cardinality::Unknown("SOMETIMES".into()));
    }

    #[test]
    fn category_spec_has_every_required_field() {
        let spec = CategorySpec::new("zone", Cardinality::Single).associable_types(["Datacenter"]);
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "zone", "description": "", "cardinality": "SINGLE", "associable_types": ["Datacenter"]})
        );
        let update = CategoryUpdate {
            cardinality: Some(Cardinality::Multiple),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            serde_json::json!({"cardinality": "MULTIPLE"})
        );
    }

    #[test]
    fn pick_prefers_ids() {
        let tags = vec![
            Tag {
                id: "t1".into(),
                name: "t2".into(),
                ..Default::default()
            },
            Tag {
                id: "t2".into(),
                name: "x".into(),
                ..Default::default()
            },
        ];
        assert_eq!(
            pick(tags.clone(), "t2", |t| (&t.id, &t.name)).unwrap().id,
            "t2"
        );
        assert_eq!(
            pick(tags.clone(), "x", |t| (&t.id, &t.name)).unwrap().id,
            "t2"
        );
        assert!(pick(tags, "nope", |t| (&t.id, &t.name)).is_none());
    }
}
