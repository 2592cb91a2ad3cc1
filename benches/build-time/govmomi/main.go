// The user-seat build benchmark's program on govmomi (benches/build-time/run): connect,
// list every VM through a container view and the property collector, clone one and power
// the clone on. usage: seat -u https://user:pass@host/sdk SOURCE_VM NEW_NAME
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// Changed by the benchmark to time a rebuild after an edit of main.
const edit = "0"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	u := flag.String("u", "https://user:pass@127.0.0.1:8989/sdk", "url")
	flag.Parse()
	if flag.NArg() != 2 {
		return fmt.Errorf("usage: seat -u URL SOURCE_VM NEW_NAME")
	}
	source, name := flag.Arg(0), flag.Arg(1)
	ctx := context.Background()
	pu, err := url.Parse(*u)
	if err != nil {
		return err
	}
	c, err := govmomi.NewClient(ctx, pu, true)
	if err != nil {
		return err
	}
	m := view.NewManager(c.Client)
	v, err := m.CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		return err
	}
	var vms []mo.VirtualMachine
	err = v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "runtime.powerState", "parent", "resourcePool"}, &vms)
	if err != nil {
		return err
	}
	var found *mo.VirtualMachine
	for i := range vms {
		fmt.Println(vms[i].Name, vms[i].Runtime.PowerState)
		if vms[i].Name == source {
			found = &vms[i]
		}
	}
	if found == nil || found.Parent == nil {
		return fmt.Errorf("no VM named %s with a folder", source)
	}
	spec := types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: found.ResourcePool}}
	folder := object.NewFolder(c.Client, *found.Parent)
	task, err := object.NewVirtualMachine(c.Client, found.Reference()).Clone(ctx, folder, name, spec)
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return err
	}
	clone := object.NewVirtualMachine(c.Client, info.Result.(types.ManagedObjectReference))
	task, err = clone.PowerOn(ctx)
	if err != nil {
		return err
	}
	if err := task.Wait(ctx); err != nil {
		return err
	}
	fmt.Printf("%s is powered on (%s, edit %s)\n", name, clone.Reference().Value, edit)
	return c.Logout(ctx)
}
