package openstacksim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
)

// Nova server views: GET /v2.1/servers/{id} and the server document per
// microversion.

// novaShow implements GET /v2.1/servers/{id}: 404 itemNotFound for an
// unknown or deleted server and, for a caller without admin, for another
// project's server (the DB lookup is project-scoped).
func (c *Cloud) novaShow(w http.ResponseWriter, _ *http.Request, minor int, id string) {
	admin := !c.opts.NovaNonAdmin
	c.mu.Lock()
	rec, ok := c.servers[id]
	if !ok || rec.deleted || (!admin && rec.s.TenantID != c.projectID) {
		c.mu.Unlock()
		novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
		return
	}
	s := c.renderServer(rec, minor, admin)
	if minor >= 71 {
		s["server_groups"] = []any{}
	}
	c.mu.Unlock()
	writeNovaJSON(w, http.StatusOK, map[string]any{"server": s})
}

// novaTime is nova.utils.isotime: seconds, "Z".
func novaTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// novaUsageTime is the OS-SRV-USG timestamps: a naive datetime through
// oslo jsonutils (microseconds, no zone; the stored value has whole seconds,
// as seen on the test bed); zero → null.
func novaUsageTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05") + ".000000"
}

func (c *Cloud) serverLinks(id string) []any {
	return []any{
		map[string]any{"rel": "self", "href": c.novaPublic() + "/v2.1/servers/" + id},
		map[string]any{"rel": "bookmark", "href": c.novaPublic() + "/servers/" + id},
	}
}

func (c *Cloud) renderServerIndex(rec *serverRec) map[string]any {
	return map[string]any{"id": rec.s.ID, "name": rec.s.Name, "links": c.serverLinks(rec.s.ID)}
}

// renderServer is views/servers.py ViewBuilder.show for the detail list and
// GET of one server at microversion 2.minor; admin decides the
// os-extended-server-attributes policy.
func (c *Cloud) renderServer(rec *serverRec, minor int, admin bool) map[string]any {
	s := &rec.s
	hostID := ""
	if s.Host != "" {
		sum := sha256.Sum224([]byte(s.TenantID + s.Host))
		hostID = hex.EncodeToString(sum[:])
	}
	m := map[string]any{
		"id":        s.ID,
		"name":      s.Name,
		"status":    s.Status,
		"tenant_id": s.TenantID,
		"user_id":   s.UserID,
		"metadata":  s.Metadata,
		"hostId":    hostID,
		"image": map[string]any{"id": simImageID, "links": []any{
			map[string]any{"rel": "bookmark", "href": c.novaPublic() + "/images/" + simImageID}}},
		"created":                              novaTime(s.Created),
		"updated":                              novaTime(s.Updated),
		"addresses":                            map[string]any{},
		"accessIPv4":                           "",
		"accessIPv6":                           "",
		"links":                                c.serverLinks(s.ID),
		"OS-DCF:diskConfig":                    "MANUAL",
		"OS-EXT-AZ:availability_zone":          "nova",
		"config_drive":                         "",
		"key_name":                             nil,
		"OS-SRV-USG:launched_at":               novaUsageTime(s.LaunchedAt),
		"OS-SRV-USG:terminated_at":             nil,
		"OS-EXT-STS:task_state":                strOrNil(s.TaskState),
		"OS-EXT-STS:vm_state":                  s.VMState,
		"OS-EXT-STS:power_state":               s.PowerState,
		"os-extended-volumes:volumes_attached": []any{},
	}
	if rec.deleted {
		m["OS-SRV-USG:terminated_at"] = novaUsageTime(rec.deletedAt)
	}
	if s.Status == ServerBuild {
		m["OS-EXT-AZ:availability_zone"] = ""
	}
	if f := c.serverFaultLocked(s.ID); f != "" && s.Status == ServerError {
		m["fault"] = map[string]any{"code": 500, "message": f, "created": novaTime(s.Updated)}
	}
	switch s.Status {
	case "ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING":
		m["progress"] = 0
	}
	m["flavor"] = c.serverFlavor(minor, admin)
	if admin {
		addAdminServerAttrs(m, s, minor)
	} else if minor >= 90 {
		m["OS-EXT-SRV-ATTR:hostname"] = s.Name
	}
	addVersionedServerFields(m, minor)
	return m
}

// serverFlavor is the server's flavor: the embedded flavor body from 2.47
// (extra_specs for admins), a link to the flavor before.
func (c *Cloud) serverFlavor(minor int, admin bool) map[string]any {
	if minor >= 47 {
		flavor := map[string]any{"vcpus": 1, "ram": 1024, "disk": 10, "ephemeral": 0, "swap": 0, "original_name": simFlavorName}
		if admin {
			flavor["extra_specs"] = simFlavorExtraSpecs()
		}
		return flavor
	}
	return map[string]any{"id": simFlavorID, "links": []any{
		map[string]any{"rel": "bookmark", "href": c.novaPublic() + "/flavors/" + simFlavorID}}}
}

// addAdminServerAttrs adds what os-extended-server-attributes and
// host_status show an admin.
func addAdminServerAttrs(m map[string]any, s *Server, minor int) {
	m["OS-EXT-SRV-ATTR:host"] = strOrNil(s.Host)
	m["OS-EXT-SRV-ATTR:instance_name"] = s.InstanceName
	m["OS-EXT-SRV-ATTR:hypervisor_hostname"] = strOrNil(s.HypervisorHostname)
	if minor >= 3 {
		m["OS-EXT-SRV-ATTR:reservation_id"] = "r-" + s.ID[:min(8, len(s.ID))]
		m["OS-EXT-SRV-ATTR:launch_index"] = 0
		m["OS-EXT-SRV-ATTR:hostname"] = s.Name
		m["OS-EXT-SRV-ATTR:kernel_id"] = ""
		m["OS-EXT-SRV-ATTR:ramdisk_id"] = ""
		m["OS-EXT-SRV-ATTR:root_device_name"] = nil
		if !s.LaunchedAt.IsZero() {
			m["OS-EXT-SRV-ATTR:root_device_name"] = "/dev/sda"
		}
		m["OS-EXT-SRV-ATTR:user_data"] = nil
	}
	if minor >= 16 {
		hs := ""
		if s.Host != "" {
			hs = "UP"
		}
		m["host_status"] = hs
	}
}

// addVersionedServerFields adds the keys later microversions introduced.
func addVersionedServerFields(m map[string]any, minor int) {
	if minor >= 9 {
		m["locked"] = false
	}
	if minor >= 19 {
		m["description"] = nil
	}
	if minor >= 26 {
		m["tags"] = []any{}
	}
	if minor >= 63 {
		m["trusted_image_certificates"] = nil
	}
	if minor >= 73 {
		m["locked_reason"] = nil
	}
}
