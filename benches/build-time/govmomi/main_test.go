package main

// The seat's test, built by `go test -c` to see what a test kit (govmomi's simulator)
// adds to the build: the program's own property retrieval against a simulated vCenter.

import (
	"context"
	"testing"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
)

func TestListVMs(t *testing.T) {
	simulator.Test(func(ctx context.Context, c *vim25.Client) {
		v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
		if err != nil {
			t.Fatal(err)
		}
		var vms []mo.VirtualMachine
		if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name"}, &vms); err != nil {
			t.Fatal(err)
		}
		if len(vms) == 0 {
			t.Fatal("no VMs listed")
		}
	})
}
