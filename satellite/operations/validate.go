package operations

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// ErrInvalid marks a request that cannot be carried out as given; nothing
// was created in Ironic or Nova. Progress reports it as FAILED with
// failure_reason "InvalidArgument".
var ErrInvalid = errors.New("invalid operation request")

// bmcAddressKeys names, per hardware type, the driver_info key holding the
// BMC address (Ironic's driver documentation). Types not listed need none
// (fake-hardware) or are checked by Ironic itself.
var bmcAddressKeys = map[string][]string{
	"ipmi":     {"ipmi_address"},
	"redfish":  {"redfish_address"},
	"idrac":    {"redfish_address", "drac_address"},
	"ilo":      {"ilo_address"},
	"ilo5":     {"ilo_address"},
	"irmc":     {"irmc_address"},
	"ibmc":     {"ibmc_address"},
	"xclarity": {"xclarity_manager_ip", "xclarity_address"},
}

var logicalNameRe = regexp.MustCompile(`^[a-zA-Z0-9._~-]{1,255}$`)

// maxUserData is the size limit of config-drive and Nova user data (64 KiB).
const maxUserData = 64 << 10

// Validate checks what can be checked without asking OpenStack: the kind,
// a target, the node spec of ENROL (name, driver, BMC address, MAC
// addresses), clean steps, the image of DEPLOY and NOVA_CREATE, user data
// sizes. Errors wrap [ErrInvalid] and name the field.
func Validate(req *ironlinkv1.OperationRequest) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if req.GetOperationId() == "" {
		return bad("operation_id is empty")
	}
	k := req.GetKind()
	if k == ironlinkv1.OperationKind_OPERATION_KIND_ENROL {
		return validateEnrolNode(req.GetNode())
	}
	if req.GetDeviceId() == "" {
		return bad("device_id is empty")
	}
	p := req.GetParams()
	switch k {
	case ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE,
		ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE,
		ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF,
		ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, ironlinkv1.OperationKind_OPERATION_KIND_CLEAR_MAINTENANCE,
		ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, ironlinkv1.OperationKind_OPERATION_KIND_HARDWARE_REREAD,
		ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE:
	case ironlinkv1.OperationKind_OPERATION_KIND_ADOPT:
		if p.GetAdopt().GetImageSource() == "" {
			return bad("ADOPT needs params.adopt.image_source")
		}
	case ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE:
		if p.GetMaintenanceReason() == "" {
			return bad("SET_MAINTENANCE needs params.maintenance_reason")
		}
	case ironlinkv1.OperationKind_OPERATION_KIND_CLEAN:
		if len(p.GetCleanSteps()) == 0 {
			return bad("CLEAN needs at least one clean step")
		}
		for i, s := range p.GetCleanSteps() {
			if s.GetInterface() == "" || s.GetStep() == "" {
				return bad("params.clean_steps[%d]: interface and step are required", i)
			}
		}
	case ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY:
		d := p.GetDeploy()
		if d.GetImageSource() == "" {
			return bad("DEPLOY needs params.deploy.image_source")
		}
		if (strings.HasPrefix(d.GetImageSource(), "http://") || strings.HasPrefix(d.GetImageSource(), "https://")) && d.GetImageChecksum() == "" {
			return bad("params.deploy.image_checksum is required for an http(s) image_source")
		}
		if d.GetRootGb() < 0 {
			return bad("params.deploy.root_gb is negative")
		}
		if len(d.GetConfigDrive().GetUserData()) > maxUserData {
			return bad("params.deploy.config_drive.user_data is over 64 KiB")
		}
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE:
		nc := p.GetNovaCreate()
		if nc.GetName() == "" {
			return bad("NOVA_CREATE needs params.nova_create.name")
		}
		if nc.GetImage() == "" {
			return bad("NOVA_CREATE needs params.nova_create.image")
		}
		if len(nc.GetUserData()) > maxUserData {
			return bad("params.nova_create.user_data is over 64 KiB")
		}
	default:
		return bad("unknown kind %v", k)
	}
	return nil
}

// validateEnrolNode checks ENROL's node spec: name, driver, BMC address,
// MAC addresses, trait names. Errors wrap [ErrInvalid] and name the field.
func validateEnrolNode(n *ironlinkv1.NodeSpec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if n == nil {
		return bad("ENROL needs node")
	}
	if !logicalNameRe.MatchString(n.GetName()) {
		return bad("node.name %q: 1-255 letters, digits and -._~", n.GetName())
	}
	if n.GetDriver() == "" {
		return bad("node.driver is empty")
	}
	if keys, ok := bmcAddressKeys[n.GetDriver()]; ok {
		found := false
		for _, key := range keys {
			if strings.TrimSpace(n.GetDriverInfo()[key]) != "" {
				found = true
			}
		}
		if !found {
			return bad("node.driver_info: driver %s needs the BMC address in %s", n.GetDriver(), strings.Join(keys, " or "))
		}
	}
	for i, p := range n.GetPorts() {
		hw, err := net.ParseMAC(p.GetAddress())
		if err != nil || len(hw) != 6 || strings.Count(p.GetAddress(), ":") != 5 {
			return bad("node.ports[%d].address %q is not a MAC address (aa:bb:cc:dd:ee:ff)", i, p.GetAddress())
		}
	}
	for _, t := range n.GetTraits() {
		if !strings.HasPrefix(t, "CUSTOM_") && !regexp.MustCompile(`^[A-Z0-9_]+$`).MatchString(t) {
			return bad("node.traits: %q is not a trait name", t)
		}
	}
	return nil
}
