package openstacksim

import (
	"fmt"
	"strings"
	"time"
)

// ReadyTrait is the custom trait the satellite uses as the customer gate.
const ReadyTrait = "CUSTOM_CUSTOMER_READY"

// Reasons the test bed's seed-nodes script gives its maintenance nodes.
const (
	SeedReasonPSU = "testbed: PSU 2 failed, waiting for replacement"
	SeedReasonECC = "testbed: correctable ECC errors above threshold"
)

// seedRoles are the roles of shared/openstack-testbed/seed-nodes, by
// (index-1) % 10.
var seedRoles = []string{"available-ready", "active-ready", "available-maint", "enroll",
	"clean-failed", "manageable", "deploy-failed", "active-maint", "available", "available-ready"}

// SeedRole returns the test bed role of the i-th seeded node (1-based):
// "available-ready", "active-ready", "available-maint", "enroll",
// "clean-failed", "manageable", "deploy-failed", "active-maint",
// "available", "available-ready" for i = 1..10, repeating every 10.
func SeedRole(i int) string { return seedRoles[(i-1)%len(seedRoles)] }

// rcToPlacement is Nova's normalisation of an Ironic resource class:
// gpu-h100 → CUSTOM_GPU_H100.
func rcToPlacement(rc string) string {
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		}
		return '_'
	}, strings.ToUpper(rc))
	return "CUSTOM_" + s
}

// novaReserved is Nova's ironic driver rule the seed script copies: the
// unit is reserved when the node is unusable and not in use.
func novaReserved(n *Node) int {
	if n.InstanceUUID == "" && (n.Maintenance || n.PowerState == "" || n.PowerState == "error" || n.ProvisionState != "available") {
		return 1
	}
	return 0
}

// SeedLikeTestbed enrols n nodes named node-001… with exactly the roles of
// the test bed's seed-nodes table (repeating every 10):
//
//	1, 10  available, power off; CUSTOM_CUSTOMER_READY on the provider
//	2      active, power on, instance_uuid set; READY on the provider
//	3      available, power off, maintenance "testbed: PSU 2 failed, …"
//	4      enroll, power state null
//	5      clean failed (target manageable), last_error null, power off
//	6      manageable, power off
//	7      deploy failed (target active), last_error null, power off
//	8      active, power on, instance, maintenance "testbed: correctable ECC …"
//	9      available, power off
//
// Every node has driver fake-hardware, resource_class gpu-h100, the seed's
// properties, extra and driver_info, and one Placement resource provider
// whose uuid and name are the node UUID, with a CUSTOM_GPU_H100 inventory
// (total 1, reserved as Nova computes it). CUSTOM_CUSTOMER_READY is defined
// in Placement; the READY trait is on the providers only (the seed's
// default, fake Nova driver), not on the Ironic nodes. Nodes whose name
// already exists are left alone, as the script does. It returns the seeded
// nodes in order.
//
// Unless the site has no Nova, every seeded node with an instance_uuid
// (roles 2 and 8) also gets its Nova server, as Nova's Ironic driver would
// have booted it (see the test bed's seed-servers): ID = instance_uuid,
// ACTIVE, OS-EXT-SRV-ATTR:hypervisor_hostname = node UUID, host
// [SimComputeHost], name = the node's instance_info display_name, project =
// the node's lessee, else its owner (the credential's project). A seeded
// cloud therefore has no orphans; [Cloud.SeedOrphans] makes some.
func (c *Cloud) SeedLikeTestbed(n int) []Node {
	c.DefineTrait(ReadyTrait)
	now := c.now()
	base := now.Add(-time.Duration(n+60) * time.Second)
	out := make([]Node, 0, n)
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node-%03d", i)
		if existing, ok := c.nodeByName(name); ok {
			out = append(out, existing)
			continue
		}
		created := base.Add(time.Duration(i) * time.Second)
		provisioned := created.Add(500 * time.Millisecond)
		node := Node{
			Name:          name,
			Driver:        "fake-hardware",
			ResourceClass: "gpu-h100",
			Properties: map[string]any{"cpus": 112, "memory_mb": 2097152, "local_gb": 3576,
				"cpu_arch": "x86_64", "capabilities": "boot_mode:uefi"},
			Extra:              map[string]any{"seeded_by": "openstack-testbed", "rack": fmt.Sprintf("r%d", (i-1)/8+1)},
			DriverInfo:         map[string]any{"fake_bmc": "bmc-" + name},
			CreatedAt:          created,
			UpdatedAt:          provisioned,
			ProvisionUpdatedAt: provisioned,
			PowerState:         "power off",
			// created with the agent's project-scoped admin credential
			Owner: c.projectID,
		}
		role := SeedRole(i)
		applySeedRole(&node, role)
		node = c.AddNode(node)
		out = append(out, node)

		c.seedProvider(node, role, created, provisioned)
	}
	return out
}

func (c *Cloud) nodeByName(name string) (Node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec := c.nodeNamedLocked(name, nil); rec != nil {
		return cloneNode(rec.n), true
	}
	return Node{}, false
}

// applySeedRole sets the provision state, power, instance and maintenance
// of one seeded node's role (see SeedLikeTestbed).
func applySeedRole(node *Node, role string) {
	switch role {
	case "available-ready", "available":
		node.ProvisionState = "available"
	case "available-maint":
		node.ProvisionState = "available"
		node.Maintenance, node.MaintenanceReason = true, SeedReasonPSU
	case "active-ready", "active-maint":
		node.ProvisionState = "active"
		node.PowerState = "power on"
		node.InstanceUUID = newUUID()
		node.UUID = newUUID()
		node.InstanceInfo = map[string]any{"display_name": "server-" + node.UUID[:8]}
		if role == "active-maint" {
			node.Maintenance, node.MaintenanceReason = true, SeedReasonECC
		}
	case "enroll":
		node.ProvisionState = "enroll"
		node.PowerState = ""
		node.ProvisionUpdatedAt = time.Time{}
	case "clean-failed":
		node.ProvisionState, node.TargetProvisionState = "clean failed", "manageable"
	case "manageable":
		node.ProvisionState = "manageable"
	case "deploy-failed":
		node.ProvisionState, node.TargetProvisionState = "deploy failed", "active"
	}
}

// seedProvider creates the seeded node's resource provider as Nova's
// resource tracker would (inventory, then the READY trait of the "-ready"
// roles, then the instance's allocation) and the node's Nova server.
func (c *Cloud) seedProvider(node Node, role string, created, provisioned time.Time) {
	var traits []string
	if strings.HasSuffix(role, "-ready") {
		traits = []string{ReadyTrait}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.newProviderLocked(node.UUID, node.UUID, created, provisioned)
	pr.inventory = map[string]inventory{rcToPlacement(node.ResourceClass): {Total: 1, Reserved: novaReserved(&node)}}
	pr.generation = 1 // the inventory PUT
	if len(traits) > 0 {
		c.setProviderTraitsLocked(pr, traits, false)
	}
	if node.InstanceUUID != "" {
		pr.generation++ // the allocation PUT for the instance
		c.serverForNodeLocked(&node)
	}
}
