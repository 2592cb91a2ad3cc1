// Command vcsim-launcher serves govmomi's vCenter simulator for vsphere-rs's tests.
//
// It is built in GOPATH mode against Debian's golang-github-vmware-govmomi-dev
// (govmomi 0.24) by tests/vcsim/build. Once the simulator listens it prints one
// line on stdout,
//
//	VCSIM_URL=https://USER:PASSWORD@127.0.0.1:PORT/sdk
//
// and serves until it gets SIGINT or SIGTERM, or, with -exit-on-stdin-eof,
// until its stdin closes (so a test harness that dies cannot leak it).
// Diagnostics go to stderr.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/ioutil"
	"log"
	"net/url"
	"os"
	"os/signal"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	// Registers the vAPI REST endpoints (/rest/com/vmware/cis/session, tagging,
	// content library) when Service.RegisterEndpoints is set.
	_ "github.com/vmware/govmomi/vapi/simulator"
)

// templateSpec is one -template flag: a template NAME created in every
// datacenter, or only in the listed ones (NAME@DC0,DC2).
type templateSpec struct {
	name        string
	datacenters []string // empty: every datacenter
}

type templateFlags []templateSpec

func (t *templateFlags) String() string {
	var parts []string
	for _, s := range *t {
		if len(s.datacenters) == 0 {
			parts = append(parts, s.name)
		} else {
			parts = append(parts, s.name+"@"+strings.Join(s.datacenters, ","))
		}
	}
	return strings.Join(parts, " ")
}

func (t *templateFlags) Set(value string) error {
	name, dcs := value, ""
	if i := strings.LastIndex(value, "@"); i >= 0 {
		name, dcs = value[:i], value[i+1:]
		if dcs == "" {
			return errors.New("expected NAME or NAME@DC[,DC...]")
		}
	}
	if name == "" {
		return errors.New("template name is empty")
	}
	spec := templateSpec{name: name}
	if dcs != "" {
		for _, dc := range strings.Split(dcs, ",") {
			if dc == "" {
				return errors.New("empty datacenter name in " + value)
			}
			spec.datacenters = append(spec.datacenters, dc)
		}
	}
	*t = append(*t, spec)
	return nil
}

// methodDelays parses -method-delay NAME=DURATION[,NAME=DURATION...].
type methodDelays map[string]int

func (m methodDelays) String() string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%dms", k, v))
	}
	return strings.Join(parts, ",")
}

func (m methodDelays) Set(value string) error {
	for _, item := range strings.Split(value, ",") {
		kv := strings.SplitN(item, "=", 2)
		if len(kv) != 2 || kv[0] == "" {
			return errors.New("expected METHOD=DURATION, e.g. CloneVM_Task=200ms")
		}
		d, err := time.ParseDuration(kv[1])
		if err != nil {
			return err
		}
		m[kv[0]] = int(d / time.Millisecond)
	}
	return nil
}

type options struct {
	listen         string
	username       string
	password       string
	plain          bool
	tlsCert        string
	tlsKey         string
	sessionIdle    time.Duration
	delay          time.Duration
	delayJitter    float64
	methodDelay    methodDelays
	templates      templateFlags
	exitOnStdinEOF bool
	apiVersion     string
	trace          bool
	datacenter     int
	cluster        int
	clusterHost    int
	standaloneHost int
	pool           int
	machine        int
	datastore      int
	portgroup      int
	portgroupNSX   int
	opaqueNetwork  int
	folder         int
	app            int
	pod            int
	autostart      bool
	pageSize       int
	uniqueVMNames  bool
	linkedClones   bool
	noTemplateSnap bool
}

func parseFlags() *options {
	o := &options{methodDelay: methodDelays{}}
	model := simulator.VPX()
	f := flag.CommandLine
	f.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	f.StringVar(&o.username, "username", "user", "the only user name Login accepts")
	f.StringVar(&o.password, "password", "pass", "the only password Login accepts")
	f.BoolVar(&o.plain, "plain", false, "serve plain http instead of https")
	f.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve; default: the simulator's built-in localhost certificate")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of -tls-cert")
	f.DurationVar(&o.sessionIdle, "session-idle-timeout", 0, "expire SOAP and REST sessions idle this long (0: never)")
	f.DurationVar(&o.delay, "delay", 0, "delay every SOAP call by this long")
	f.Float64Var(&o.delayJitter, "delay-jitter", 0, "jitter of the delay as a coefficient of variation (stddev/mean)")
	f.Var(o.methodDelay, "method-delay", "extra delay of some methods: METHOD=DURATION[,METHOD=DURATION...]")
	f.Var(&o.templates, "template", "create a VM template NAME in every datacenter, or NAME@DC0,DC1 in those only (repeatable)")
	f.BoolVar(&o.exitOnStdinEOF, "exit-on-stdin-eof", false, "exit when stdin is closed")
	f.BoolVar(&o.trace, "trace", false, "log SOAP requests and responses to stderr")
	f.StringVar(&o.apiVersion, "api-version", model.ServiceContent.About.ApiVersion, "API version the server reports (about.apiVersion, /sdk/vimServiceVersions.xml)")
	f.IntVar(&o.datacenter, "dc", model.Datacenter, "number of datacenters")
	f.IntVar(&o.cluster, "cluster", model.Cluster, "clusters per datacenter")
	f.IntVar(&o.clusterHost, "host", model.ClusterHost, "hosts per cluster")
	f.IntVar(&o.standaloneHost, "standalone-host", model.Host, "standalone hosts per datacenter")
	f.IntVar(&o.pool, "pool", model.Pool, "resource pools per cluster, besides the root pool")
	f.IntVar(&o.machine, "vm", model.Machine, "virtual machines per resource pool (and per standalone host)")
	f.IntVar(&o.datastore, "ds", model.Datastore, "datastores")
	f.IntVar(&o.portgroup, "pg", model.Portgroup, "distributed port groups per datacenter")
	f.IntVar(&o.portgroupNSX, "pg-nsx", model.PortgroupNSX, "NSX-backed distributed port groups per datacenter")
	f.IntVar(&o.opaqueNetwork, "nsx", model.OpaqueNetwork, "NSX opaque networks per datacenter")
	f.IntVar(&o.folder, "folder", model.Folder, "put datacenters and their contents in this many folders")
	f.IntVar(&o.app, "app", model.App, "vApps per cluster")
	f.IntVar(&o.pod, "pod", model.Pod, "storage pods per cluster")
	f.BoolVar(&o.autostart, "autostart", model.Autostart, "power on the model's VMs")
	f.IntVar(&o.pageSize, "page-size", 0, "RetrievePropertiesEx returns at most this many objects per page, whatever maxObjects asks (0: no cap)")
	f.BoolVar(&o.uniqueVMNames, "unique-vm-names", false, "a clone of a template into a folder that already holds a VM of that name fails with DuplicateName, as on vCenter")
	f.BoolVar(&o.linkedClones, "linked-clones", false, "a linked clone of a template (a snapshot, diskMoveType createNewChildDiskBacking) gets child disks whose parent is the snapshot's disk, as on vCenter")
	f.BoolVar(&o.noTemplateSnap, "refuse-template-snapshots", false, "CreateSnapshot_Task on a VM marked as a template fails with NotSupported, as on vCenter (the simulator snapshots templates)")
	flag.Parse()
	if flag.NArg() != 0 {
		fail("unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		fail("-tls-cert and -tls-key go together")
	}
	if o.plain && o.tlsCert != "" {
		fail("-plain and -tls-cert exclude each other")
	}
	if o.username == "" || o.password == "" {
		fail("-username and -password must not be empty")
	}
	if o.pageSize < 0 {
		fail("-page-size must not be negative")
	}
	return o
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "vcsim-launcher: "+format+"\n", args...)
	os.Exit(2)
}

func (o *options) model() *simulator.Model {
	m := simulator.VPX()
	m.Datacenter = o.datacenter
	m.Cluster = o.cluster
	m.ClusterHost = o.clusterHost
	m.Host = o.standaloneHost
	m.Pool = o.pool
	m.Machine = o.machine
	m.Datastore = o.datastore
	m.Portgroup = o.portgroup
	m.PortgroupNSX = o.portgroupNSX
	m.OpaqueNetwork = o.opaqueNetwork
	m.Folder = o.folder
	m.App = o.app
	m.Pod = o.pod
	m.Autostart = o.autostart
	m.ServiceContent.About.ApiVersion = o.apiVersion
	return m
}

// createTemplates clones a VM of each selected datacenter into a powered-off
// template in that datacenter's VM folder. It runs in process, before the
// server listens and before the per-call delay is switched on.
func createTemplates(ctx context.Context, service *simulator.Service, specs templateFlags) error {
	if len(specs) == 0 {
		return nil
	}
	client, err := vim25.NewClient(ctx, service)
	if err != nil {
		return err
	}
	finder := find.NewFinder(client, false)
	all, err := finder.DatacenterList(ctx, "*")
	if err != nil {
		return fmt.Errorf("listing datacenters: %w", err)
	}
	byName := map[string]*object.Datacenter{}
	for _, dc := range all {
		byName[dc.Name()] = dc
	}
	for _, spec := range specs {
		targets := all
		if len(spec.datacenters) > 0 {
			targets = nil
			for _, name := range spec.datacenters {
				dc, ok := byName[name]
				if !ok {
					return fmt.Errorf("-template %s: no datacenter named %q", spec.name, name)
				}
				targets = append(targets, dc)
			}
		}
		for _, dc := range targets {
			if err := cloneTemplate(ctx, finder, dc, spec.name); err != nil {
				return fmt.Errorf("-template %s in %s: %w", spec.name, dc.Name(), err)
			}
		}
	}
	return nil
}

func cloneTemplate(ctx context.Context, finder *find.Finder, dc *object.Datacenter, name string) error {
	finder.SetDatacenter(dc)
	vms, err := finder.VirtualMachineList(ctx, "*")
	if err != nil {
		return fmt.Errorf("no virtual machine to clone (the model needs -vm >= 1): %w", err)
	}
	source := vms[0]
	pool, err := source.ResourcePool(ctx)
	if err != nil {
		return err
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	poolRef := pool.Reference()
	spec := types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &poolRef},
		Template: true,
	}
	task, err := source.Clone(ctx, folders.VmFolder, name, spec)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// pagingCollector is the root PropertyCollector with the paging of
// RetrievePropertiesEx that govmomi 0.24's simulator lacks (it ignores
// RetrieveOptions.maxObjects and has no ContinueRetrievePropertiesEx): like
// vCenter, a result larger than maxObjects (or than -page-size, which caps
// pages whatever the client asks) is returned a page at a time with a token
// for the rest.
//
// The simulator makes one instance per session of the collector's type with
// reflect.New, so the embedded collector is a value (a nil pointer would
// not survive that) and the pending results live in pendingPages.
type pagingCollector struct {
	simulator.PropertyCollector
}

// pendingPages holds the objects not yet returned, by token.
var pendingPages = struct {
	sync.Mutex
	next     int
	pageSize int
	results  map[string]*pendingResult
}{results: map[string]*pendingResult{}}

type pendingResult struct {
	session string
	limit   int
	objects []types.ObjectContent
}

func installPaging(pageSize int) {
	pendingPages.pageSize = pageSize
	ref := types.ManagedObjectReference{Type: "PropertyCollector", Value: "propertyCollector"}
	pc, ok := simulator.Map.Get(ref).(*simulator.PropertyCollector)
	if !ok {
		fail("no root PropertyCollector to extend")
	}
	simulator.Map.Put(&pagingCollector{PropertyCollector: *pc})
}

func sessionKey(ctx *simulator.Context) string {
	if ctx.Session == nil {
		return ""
	}
	return ctx.Session.Key
}

// page cuts objects after limit (0: no limit) and keeps the rest under a
// new token.
func page(ctx *simulator.Context, objects []types.ObjectContent, limit int) types.RetrieveResult {
	pendingPages.Lock()
	defer pendingPages.Unlock()
	if pendingPages.pageSize > 0 && (limit <= 0 || limit > pendingPages.pageSize) {
		limit = pendingPages.pageSize
	}
	if limit <= 0 || len(objects) <= limit {
		return types.RetrieveResult{Objects: objects}
	}
	pendingPages.next++
	token := strconv.Itoa(pendingPages.next)
	pendingPages.results[token] = &pendingResult{session: sessionKey(ctx), limit: limit, objects: objects[limit:]}
	return types.RetrieveResult{Objects: objects[:limit], Token: token}
}

// maxObjects is the page size the client asked for (0: unset).
func maxObjects(options types.RetrieveOptions) int {
	return int(options.MaxObjects)
}

func (pc *pagingCollector) RetrievePropertiesEx(ctx *simulator.Context, r *types.RetrievePropertiesEx) soap.HasFault {
	res := pc.PropertyCollector.RetrievePropertiesEx(ctx, r)
	body, ok := res.(*methods.RetrievePropertiesExBody)
	if !ok || body.Fault_ != nil || body.Res == nil || body.Res.Returnval == nil {
		return res
	}
	result := page(ctx, body.Res.Returnval.Objects, maxObjects(r.Options))
	body.Res.Returnval = &result
	return body
}

func (pc *pagingCollector) ContinueRetrievePropertiesEx(ctx *simulator.Context, r *types.ContinueRetrievePropertiesEx) soap.HasFault {
	body := &methods.ContinueRetrievePropertiesExBody{}
	pendingPages.Lock()
	pending, ok := pendingPages.results[r.Token]
	if ok && pending.session == sessionKey(ctx) {
		delete(pendingPages.results, r.Token)
	} else {
		ok = false
	}
	pendingPages.Unlock()
	if !ok {
		body.Fault_ = simulator.Fault("unknown or finished token", &types.InvalidArgument{InvalidProperty: "token"})
		return body
	}
	// A continued result keeps the page size it started with.
	body.Res = &types.ContinueRetrievePropertiesExResponse{Returnval: page(ctx, pending.objects, pending.limit)}
	return body
}

func (pc *pagingCollector) CancelRetrievePropertiesEx(ctx *simulator.Context, r *types.CancelRetrievePropertiesEx) soap.HasFault {
	body := &methods.CancelRetrievePropertiesExBody{}
	pendingPages.Lock()
	pending, ok := pendingPages.results[r.Token]
	if ok && pending.session == sessionKey(ctx) {
		delete(pendingPages.results, r.Token)
	} else {
		ok = false
	}
	pendingPages.Unlock()
	if !ok {
		body.Fault_ = simulator.Fault("unknown or finished token", &types.InvalidArgument{InvalidProperty: "token"})
		return body
	}
	body.Res = &types.CancelRetrievePropertiesExResponse{}
	return body
}

// modelTemplate is a template whose clones behave as on vCenter where
// govmomi 0.24's simulator does not:
//   - uniqueNames: clones keep VM names unique per folder (the simulator
//     makes a second VM of the same name). The check runs when the call is
//     carried out, after any -method-delay, so a clone sent while another of
//     the same name is delayed fails once the first one exists: the case of
//     a request sent twice;
//   - linkedClones: a clone with a snapshot and diskMoveType
//     createNewChildDiskBacking gets disks whose backing's parent is the
//     snapshot's disk, as vCenter's linked clones do (the simulator copies
//     the disks, and hands the template's own device objects to the clone,
//     blanking their file names: a linked clone gets copies instead). Nothing
//     changes for a clone without both;
//   - refuseSnapshots: CreateSnapshot_Task fails with NotSupported ("The
//     operation is not supported on the object.") while the VM is marked as
//     a template, as vCenter refuses it (a template's snapshot is taken by
//     turning it into a VM first). The check is made when the call comes
//     in, so a template turned into a VM (MarkAsVirtualMachine) and back
//     keeps its wrapper and its snapshots;
//   - always: a reconfigure that sets the annotation to "" clears it, as on
//     vCenter (the simulator keeps the old one). govmomi's types cannot
//     tell an empty annotation from none, so a spec with nothing set at all
//     (a reconfigure that changes nothing else) is taken as that.
type modelTemplate struct {
	simulator.VirtualMachine
	uniqueNames     bool
	linkedClones    bool
	refuseSnapshots bool
}

func (vm *modelTemplate) CloneVMTask(ctx *simulator.Context, req *types.CloneVM_Task) soap.HasFault {
	if vm.uniqueNames {
		if folder, ok := simulator.Map.Get(req.Folder).(mo.Entity); ok {
			if f, ok := folder.(*simulator.Folder); ok {
				if existing := simulator.Map.FindByName(req.Name, f.ChildEntity); existing != nil {
					return &methods.CloneVM_TaskBody{Fault_: simulator.Fault("", &types.DuplicateName{Name: req.Name, Object: existing.Reference()})}
				}
			}
		}
	}
	linked := vm.linkedClones && req.Spec.Snapshot != nil &&
		req.Spec.Location.DiskMoveType == string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking)
	if !linked {
		return vm.VirtualMachine.CloneVMTask(ctx, req)
	}
	own := vm.Config.Hardware.Device
	vm.Config.Hardware.Device = diskCopies(own)
	res := vm.VirtualMachine.CloneVMTask(ctx, req)
	vm.Config.Hardware.Device = own
	linkDisks(res, *req.Spec.Snapshot)
	return res
}

func (vm *modelTemplate) ReconfigVMTask(ctx *simulator.Context, req *types.ReconfigVM_Task) soap.HasFault {
	if reflect.DeepEqual(req.Spec, types.VirtualMachineConfigSpec{}) {
		// The simulator holds the VM's lock during the call.
		vm.Config.Annotation = ""
		vm.Summary.Config.Annotation = ""
	}
	return vm.VirtualMachine.ReconfigVMTask(ctx, req)
}

// CreateSnapshotTask runs with the plain VM in the registry: the
// simulator's snapshot code looks its VM up as a *simulator.VirtualMachine.
func (vm *modelTemplate) CreateSnapshotTask(req *types.CreateSnapshot_Task) soap.HasFault {
	if vm.refuseSnapshots && vm.Config.Template {
		return &methods.CreateSnapshot_TaskBody{Fault_: simulator.Fault("The operation is not supported on the object.", new(types.NotSupported))}
	}
	simulator.Map.Put(&vm.VirtualMachine)
	defer simulator.Map.Put(vm)
	return vm.VirtualMachine.CreateSnapshotTask(req)
}

// diskCopies is devices with each flat disk (and its backing) copied.
func diskCopies(devices []types.BaseVirtualDevice) []types.BaseVirtualDevice {
	out := make([]types.BaseVirtualDevice, len(devices))
	for i, device := range devices {
		out[i] = device
		if disk, ok := device.(*types.VirtualDisk); ok {
			c := *disk
			if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
				bc := *b
				c.Backing = &bc
			}
			out[i] = &c
		}
	}
	return out
}

// linkDisks gives the disks of the clone a finished clone task made the
// snapshot's disks, in order, as their backings' parents.
func linkDisks(res soap.HasFault, snapshot types.ManagedObjectReference) {
	body, ok := res.(*methods.CloneVM_TaskBody)
	if !ok || body.Res == nil {
		return
	}
	task, ok := simulator.Map.Get(body.Res.Returnval).(*simulator.Task)
	if !ok || task.Info.State != types.TaskInfoStateSuccess {
		return
	}
	ref, ok := task.Info.Result.(types.ManagedObjectReference)
	if !ok {
		return
	}
	clone, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine)
	snap, ok2 := simulator.Map.Get(snapshot).(*simulator.VirtualMachineSnapshot)
	if !ok || !ok2 {
		return
	}
	var parents []*types.VirtualDiskFlatVer2BackingInfo
	for _, device := range snap.Config.Hardware.Device {
		if disk, ok := device.(*types.VirtualDisk); ok {
			if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
				parent := *b
				parent.Parent = nil
				parents = append(parents, &parent)
			}
		}
	}
	simulator.Map.WithLock(clone, func() {
		i := 0
		for _, device := range clone.Config.Hardware.Device {
			if disk, ok := device.(*types.VirtualDisk); ok && i < len(parents) {
				if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
					b.Parent = parents[i]
					i++
				}
			}
		}
	})
}

func installModelTemplates(uniqueNames, linkedClones, refuseSnapshots bool) {
	for _, entity := range simulator.Map.All("VirtualMachine") {
		vm, ok := entity.(*simulator.VirtualMachine)
		if !ok || vm.Config == nil || !vm.Config.Template {
			continue
		}
		simulator.Map.Put(&modelTemplate{VirtualMachine: *vm, uniqueNames: uniqueNames, linkedClones: linkedClones, refuseSnapshots: refuseSnapshots})
	}
}

func tlsConfig(o *options) (*tls.Config, error) {
	if o.plain {
		return nil, nil
	}
	if o.tlsCert == "" {
		// The simulator serves its built-in localhost certificate.
		return new(tls.Config), nil
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("loading -tls-cert/-tls-key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}

// startServer starts listening; the simulator panics when it cannot listen
// (port in use), which we turn into an error message.
func startServer(service *simulator.Service) (server *simulator.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return service.NewServer(), nil
}

func run() error {
	o := parseFlags()
	simulator.SessionIdleTimeout = o.sessionIdle
	simulator.Trace = o.trace

	tlsConf, err := tlsConfig(o)
	if err != nil {
		return err
	}

	model := o.model()
	if err := model.Create(); err != nil {
		return fmt.Errorf("creating the inventory: %w", err)
	}
	defer model.Remove()

	ctx := context.Background()
	if err := createTemplates(ctx, model.Service, o.templates); err != nil {
		return err
	}
	installPaging(o.pageSize)
	if o.uniqueVMNames || o.linkedClones || o.noTemplateSnap {
		installModelTemplates(o.uniqueVMNames, o.linkedClones, o.noTemplateSnap)
	}
	// Model.Create points the service at model.DelayConfig; setting it only
	// now keeps the templates' setup calls fast.
	model.DelayConfig = simulator.DelayConfig{
		Delay:       int(o.delay / time.Millisecond),
		DelayJitter: o.delayJitter,
		MethodDelay: o.methodDelay,
	}

	model.Service.TLS = tlsConf
	model.Service.RegisterEndpoints = true
	model.Service.Listen = &url.URL{Host: o.listen, User: url.UserPassword(o.username, o.password)}
	server, err := startServer(model.Service)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.listen, err)
	}
	defer server.Close()

	// server.URL carries the credentials; print it on one line for the harness
	// (os.Stdout is unbuffered).
	fmt.Printf("VCSIM_URL=%s\n", server.URL.String())

	stop := make(chan string, 2)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() { stop <- (<-signals).String() }()
	if o.exitOnStdinEOF {
		go func() {
			_, _ = io.Copy(ioutil.Discard, os.Stdin)
			stop <- "stdin closed"
		}()
	}
	reason := <-stop
	fmt.Fprintf(os.Stderr, "vcsim-launcher: stopping (%s)\n", reason)
	return nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "vcsim-launcher: %v\n", err)
		os.Exit(1)
	}
}
