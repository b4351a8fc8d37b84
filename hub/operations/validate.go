package operations

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Limits on StartOperation input.
const (
	// MaxTargets bounds devices or nodes per request.
	MaxTargets = 1000
	// MaxReasonBytes bounds reason.
	MaxReasonBytes = 1024
	// MaxUserDataBytes bounds cloud-init user data (config drive, Nova).
	MaxUserDataBytes = 64 << 10
	// MaxCleanSteps bounds a CLEAN's steps.
	MaxCleanSteps = 50
	// MaxMaintenanceReasonBytes bounds SET_MAINTENANCE's reason (Ironic's
	// maintenance_reason column is 255 characters).
	MaxMaintenanceReasonBytes = 255
	// MaxPowerTimeoutSeconds bounds the power change timeout, in seconds.
	MaxPowerTimeoutSeconds = 3600
	maxPorts               = 64
	maxTraits              = 50
	maxKeys                = 64
	maxValueBytes          = 4096
	maxSSHKeys             = 32
	maxNetworks            = 16
)

var (
	// Ironic node names: letters, digits and "-._~", 1-255 bytes.
	nodeNameRe = regexp.MustCompile(`^[A-Za-z0-9\-._~]{1,255}$`)
	// Ironic hardware type (driver) names: lower-case entry-point names.
	driverRe = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	// driver_info keys.
	keyRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	macRe = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)
	// Traits: os-traits standard names or CUSTOM_*, upper-case, ≤ 255 bytes.
	traitRe = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,254}$`)
	// Resource classes as Ironic takes them (≤ 80 bytes).
	resourceClassRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,80}$`)
	// Clean step interfaces and names.
	stepIfaceRe = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)
	stepNameRe  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,254}$`)
	// Ironic's checksum forms: an md5 hex, "<algo>:<hex>", or a URL.
	checksumRe = regexp.MustCompile(`^((md5|sha256|sha512):)?[0-9a-f]{32,128}$|^https?://`)
)

// bmcAddressKey names the driver_info key that must hold the BMC address
// for the hardware types that talk to a BMC.
var bmcAddressKey = map[string]string{
	"ipmi":    "ipmi_address",
	"redfish": "redfish_address",
	"idrac":   "redfish_address",
	"ilo":     "ilo_address",
	"ilo5":    "ilo_address",
	"irmc":    "irmc_address",
}

func bad(field, reason, msg string) error { return grpcerr.InvalidArgument(field, reason, msg) }

// checkReason validates a required reason.
func checkReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", bad("reason", grpcerr.ReasonRequired, "reason is required: say why (it is kept with the operation)")
	}
	if err := textcheck.Text("reason", reason, MaxReasonBytes); err != nil {
		return "", grpcerr.FromCheck(err)
	}
	return reason, nil
}

// checkShape validates everything of req that needs no database: kind,
// site, targets' form, parameters against the kind. It returns the trimmed
// reason.
func checkShape(req *ironlinkv1.StartOperationRequest) (string, error) {
	kind := req.GetKind()
	if KindToStore(kind) == "" {
		return "", bad("kind", grpcerr.ReasonInvalidValue, fmt.Sprintf("kind %d is not an operation kind (ENROL, INSPECT, CLEAN, PROVIDE, DEPLOY, UNDEPLOY, NOVA_CREATE, NOVA_DELETE, POWER_ON, POWER_OFF, REBOOT, SET_MAINTENANCE, CLEAR_MAINTENANCE, REPROVISION, ADOPT, HARDWARE_REREAD, VALIDATE)", kind))
	}
	reason, err := checkReason(req.GetReason())
	if err != nil {
		return "", err
	}
	if s := req.GetSite(); s != "" && !sitename.Valid(s) {
		return "", bad("site", grpcerr.ReasonInvalidValue, "site "+textcheck.Quote(s)+" is not a valid site name")
	}
	if kind == ironlinkv1.OperationKind_OPERATION_KIND_ENROL {
		if req.GetSite() == "" {
			return "", bad("site", grpcerr.ReasonRequired, "site is required for ENROL")
		}
		if len(req.GetDevices()) > 0 {
			return "", bad("devices", grpcerr.ReasonInvalidValue, "ENROL takes nodes, not devices")
		}
		if err := checkTargets("nodes", len(req.GetNodes())); err != nil {
			return "", err
		}
		names := map[string]int{}
		macs := map[string]string{}
		for i, n := range req.GetNodes() {
			if j, dup := names[n.GetName()]; dup && n.GetName() != "" {
				return "", bad(fmt.Sprintf("nodes[%d].name", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("nodes[%d].name %s is also nodes[%d]'s", i, textcheck.Quote(n.GetName()), j))
			}
			if err := checkNode(fmt.Sprintf("nodes[%d]", i), n, macs); err != nil {
				return "", err
			}
			names[n.GetName()] = i
		}
	} else {
		if len(req.GetNodes()) > 0 {
			return "", bad("nodes", grpcerr.ReasonInvalidValue, "only ENROL takes nodes; name devices")
		}
		if err := checkTargets("devices", len(req.GetDevices())); err != nil {
			return "", err
		}
		for i, d := range req.GetDevices() {
			if err := textcheck.Line(fmt.Sprintf("devices[%d]", i), d, 255); err != nil {
				return "", grpcerr.FromCheck(err)
			}
			if d == "" {
				return "", bad(fmt.Sprintf("devices[%d]", i), grpcerr.ReasonRequired, "a device UUID or name is required")
			}
		}
	}
	return reason, checkParams(kind, req.GetParams())
}

func checkTargets(field string, n int) error {
	switch {
	case n == 0:
		return bad(field, grpcerr.ReasonRequired, field+": at least one target is required")
	case n > MaxTargets:
		return bad(field, grpcerr.ReasonOutOfRange, fmt.Sprintf("%s: %d targets, at most %d per request", field, n, MaxTargets))
	}
	return nil
}

// checkNode validates one NodeSpec; macs collects the request's MACs (a
// MAC may be on one port only).
func checkNode(f string, n *ironlinkv1.NodeSpec, macs map[string]string) error {
	if n.GetName() == "" {
		return bad(f+".name", grpcerr.ReasonRequired, f+".name is required (enrolment is idempotent by name)")
	}
	if !nodeNameRe.MatchString(n.GetName()) {
		return bad(f+".name", grpcerr.ReasonInvalidValue, f+".name "+textcheck.Quote(n.GetName())+" is not a valid Ironic node name (1-255 bytes of letters, digits and \"-._~\")")
	}
	if n.GetDriver() == "" {
		return bad(f+".driver", grpcerr.ReasonRequired, f+".driver (hardware type, e.g. ipmi, redfish) is required")
	}
	if !driverRe.MatchString(n.GetDriver()) {
		return bad(f+".driver", grpcerr.ReasonInvalidValue, f+".driver "+textcheck.Quote(n.GetDriver())+" is not a hardware type name (lower-case letters, digits, '-' and '_')")
	}
	if len(n.GetDriverInfo()) > maxKeys {
		return bad(f+".driver_info", grpcerr.ReasonOutOfRange, fmt.Sprintf("%s.driver_info has %d keys, at most %d", f, len(n.GetDriverInfo()), maxKeys))
	}
	for k, v := range n.GetDriverInfo() {
		if !keyRe.MatchString(k) {
			return bad(f+".driver_info", grpcerr.ReasonInvalidValue, f+".driver_info key "+textcheck.Quote(k)+" is not a driver_info key (lower-case letters, digits, '_')")
		}
		// The value is a secret: never echoed.
		if err := textcheck.Line(f+".driver_info["+k+"]", v, maxValueBytes); err != nil {
			return bad(f+".driver_info["+k+"]", grpcerr.ReasonInvalidValue, f+".driver_info["+k+"] is not a one-line text of at most 4096 bytes")
		}
	}
	if key, ok := bmcAddressKey[n.GetDriver()]; ok && strings.TrimSpace(n.GetDriverInfo()[key]) == "" {
		return bad(f+".driver_info", grpcerr.ReasonRequired, fmt.Sprintf("%s.driver_info needs %s: the BMC address for the %s hardware type", f, key, n.GetDriver()))
	}
	if rc := n.GetResourceClass(); rc != "" && !resourceClassRe.MatchString(rc) {
		return bad(f+".resource_class", grpcerr.ReasonInvalidValue, f+".resource_class "+textcheck.Quote(rc)+" is not a resource class (letters, digits, '_', '.', '-', at most 80 bytes)")
	}
	for _, p := range []struct{ field, v string }{{"owner", n.GetOwner()}, {"lessee", n.GetLessee()}} {
		if err := textcheck.Line(f+"."+p.field, p.v, 255); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	if len(n.GetTraits()) > maxTraits {
		return bad(f+".traits", grpcerr.ReasonOutOfRange, fmt.Sprintf("%s.traits: %d, at most %d", f, len(n.GetTraits()), maxTraits))
	}
	for i, t := range n.GetTraits() {
		if !traitRe.MatchString(t) {
			return bad(fmt.Sprintf("%s.traits[%d]", f, i), grpcerr.ReasonInvalidValue, fmt.Sprintf("%s.traits[%d] %s is not a trait name (upper-case letters, digits, '_', e.g. CUSTOM_RACK_A1)", f, i, textcheck.Quote(t)))
		}
	}
	if len(n.GetPorts()) > maxPorts {
		return bad(f+".ports", grpcerr.ReasonOutOfRange, fmt.Sprintf("%s.ports: %d, at most %d", f, len(n.GetPorts()), maxPorts))
	}
	for i, p := range n.GetPorts() {
		pf := fmt.Sprintf("%s.ports[%d].address", f, i)
		if !macRe.MatchString(p.GetAddress()) {
			return bad(pf, grpcerr.ReasonInvalidValue, pf+" "+textcheck.Quote(p.GetAddress())+" is not a MAC address (aa:bb:cc:dd:ee:ff)")
		}
		mac := strings.ToLower(p.GetAddress())
		if other, dup := macs[mac]; dup {
			return bad(pf, grpcerr.ReasonInvalidValue, fmt.Sprintf("%s %s is also %s", pf, mac, other))
		}
		macs[mac] = pf
	}
	return nil
}

// checkParams validates params against kind: a kind's own parameters,
// and no parameters of another kind.
func checkParams(kind ironlinkv1.OperationKind, p *ironlinkv1.OperationParams) error {
	if err := checkParamsOfOtherKinds(kind, p); err != nil {
		return err
	}
	switch kind {
	case ironlinkv1.OperationKind_OPERATION_KIND_CLEAN:
		return checkCleanSteps(p.GetCleanSteps())
	case ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION:
		if len(p.GetCleanSteps()) > 0 {
			return checkCleanSteps(p.GetCleanSteps())
		}
	case ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE:
		return checkValidateParams(p)
	case ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY:
		return checkDeployParams(p.GetDeploy())
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE:
		return checkNovaCreateParams(p.GetNovaCreate())
	case ironlinkv1.OperationKind_OPERATION_KIND_ADOPT:
		return checkAdoptParams(p.GetAdopt())
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE:
		if id := p.GetServerId(); id != "" {
			if _, err := uuid.Parse(id); err != nil {
				return bad("params.server_id", grpcerr.ReasonNotUUID, "params.server_id "+textcheck.Quote(id)+" is not a server id (UUID)")
			}
		}
	case ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE:
		r := p.GetMaintenanceReason()
		if strings.TrimSpace(r) == "" {
			return bad("params.maintenance_reason", grpcerr.ReasonRequired, "SET_MAINTENANCE needs params.maintenance_reason (what Ironic records as the node's maintenance_reason)")
		}
		if err := textcheck.Line("params.maintenance_reason", r, MaxMaintenanceReasonBytes); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	if t := p.GetPowerTimeoutSeconds(); t > MaxPowerTimeoutSeconds {
		return bad("params.power_timeout_seconds", grpcerr.ReasonOutOfRange, fmt.Sprintf("params.power_timeout_seconds: %d, at most %d", t, MaxPowerTimeoutSeconds))
	}
	return nil
}

// powerKinds take params.power_timeout_seconds; softKinds also params.soft.
var (
	powerKinds = []ironlinkv1.OperationKind{ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON,
		ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, ironlinkv1.OperationKind_OPERATION_KIND_REBOOT}
	softKinds = powerKinds[1:]
)

// cleanStepKinds are the kinds that take params.clean_steps.
var cleanStepKinds = []ironlinkv1.OperationKind{ironlinkv1.OperationKind_OPERATION_KIND_CLEAN,
	ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE}

// checkParamsOfOtherKinds refuses parameters that belong to another kind
// than kind (clean steps of a DEPLOY, ...).
func checkParamsOfOtherKinds(kind ironlinkv1.OperationKind, p *ironlinkv1.OperationParams) error {
	if len(p.GetCleanSteps()) > 0 && !slices.Contains(cleanStepKinds, kind) {
		return bad("params.clean_steps", grpcerr.ReasonInvalidValue, "params.clean_steps are for CLEAN, REPROVISION and VALIDATE only")
	}
	if len(p.GetValidationChecks()) > 0 && kind != ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE {
		return bad("params.validation_checks", grpcerr.ReasonInvalidValue, "params.validation_checks are for VALIDATE only")
	}
	if p.GetDeploy() != nil && kind != ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY {
		return bad("params.deploy", grpcerr.ReasonInvalidValue, "params.deploy is for DEPLOY only")
	}
	if p.GetAdopt() != nil && kind != ironlinkv1.OperationKind_OPERATION_KIND_ADOPT {
		return bad("params.adopt", grpcerr.ReasonInvalidValue, "params.adopt is for ADOPT only")
	}
	if p.GetNovaCreate() != nil && kind != ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE {
		return bad("params.nova_create", grpcerr.ReasonInvalidValue, "params.nova_create is for NOVA_CREATE only")
	}
	if p.GetServerId() != "" && kind != ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE {
		return bad("params.server_id", grpcerr.ReasonInvalidValue, "params.server_id is for NOVA_DELETE only")
	}
	if p.GetSoft() && !slices.Contains(softKinds, kind) {
		return bad("params.soft", grpcerr.ReasonInvalidValue, "params.soft is for POWER_OFF and REBOOT only")
	}
	if p.GetPowerTimeoutSeconds() != 0 && !slices.Contains(powerKinds, kind) {
		return bad("params.power_timeout_seconds", grpcerr.ReasonInvalidValue, "params.power_timeout_seconds is for POWER_ON, POWER_OFF and REBOOT only")
	}
	if p.GetMaintenanceReason() != "" && kind != ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE {
		return bad("params.maintenance_reason", grpcerr.ReasonInvalidValue, "params.maintenance_reason is for SET_MAINTENANCE only")
	}
	return nil
}

// checkCleanSteps validates CLEAN's steps: 1 to MaxCleanSteps of
// INTERFACE.STEP.
func checkCleanSteps(steps []*ironlinkv1.CleanStep) error {
	if len(steps) == 0 {
		return bad("params.clean_steps", grpcerr.ReasonRequired, "CLEAN needs at least one clean step (e.g. deploy.erase_devices_metadata)")
	}
	if len(steps) > MaxCleanSteps {
		return bad("params.clean_steps", grpcerr.ReasonOutOfRange, fmt.Sprintf("params.clean_steps: %d, at most %d", len(steps), MaxCleanSteps))
	}
	for i, s := range steps {
		f := fmt.Sprintf("params.clean_steps[%d]", i)
		if !stepIfaceRe.MatchString(s.GetInterface()) {
			return bad(f+".interface", grpcerr.ReasonInvalidValue, f+".interface "+textcheck.Quote(s.GetInterface())+" is not a driver interface (deploy, management, bios, raid, ...)")
		}
		if !stepNameRe.MatchString(s.GetStep()) {
			return bad(f+".step", grpcerr.ReasonInvalidValue, f+".step "+textcheck.Quote(s.GetStep())+" is not a step name (e.g. erase_devices_metadata)")
		}
	}
	return nil
}

// checkDeployParams validates DEPLOY's image (a source, and a checksum for
// an http(s) one), root size, capabilities and config drive.
func checkDeployParams(d *ironlinkv1.DeployParams) error {
	if d.GetImageSource() == "" {
		return bad("params.deploy.image_source", grpcerr.ReasonRequired, "DEPLOY needs params.deploy.image_source (a URL or Glance image id)")
	}
	if err := textcheck.Line("params.deploy.image_source", d.GetImageSource(), 2048); err != nil {
		return grpcerr.FromCheck(err)
	}
	if u, err := url.Parse(d.GetImageSource()); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		if d.GetImageChecksum() == "" {
			return bad("params.deploy.image_checksum", grpcerr.ReasonRequired, "an http(s) image_source needs params.deploy.image_checksum")
		}
	}
	if c := d.GetImageChecksum(); c != "" && !checksumRe.MatchString(c) {
		return bad("params.deploy.image_checksum", grpcerr.ReasonInvalidValue, "params.deploy.image_checksum "+textcheck.Quote(c)+" is not a checksum (hex, \"<algo>:<hex>\" or a checksum file URL)")
	}
	if d.GetRootGb() < 0 {
		return bad("params.deploy.root_gb", grpcerr.ReasonOutOfRange, fmt.Sprintf("params.deploy.root_gb %d is negative", d.GetRootGb()))
	}
	for k, v := range d.GetCapabilities() {
		if !keyRe.MatchString(k) {
			return bad("params.deploy.capabilities", grpcerr.ReasonInvalidValue, "capability "+textcheck.Quote(k)+" is not a capability name")
		}
		if err := textcheck.Line("params.deploy.capabilities["+k+"]", v, 255); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	return checkConfigDrive(d.GetConfigDrive())
}

// checkConfigDrive validates DEPLOY's config drive (none is valid): its
// user data and at most maxSSHKeys OpenSSH public keys.
func checkConfigDrive(cd *ironlinkv1.ConfigDrive) error {
	if cd == nil {
		return nil
	}
	if err := textcheck.Text("params.deploy.config_drive.user_data", cd.GetUserData(), MaxUserDataBytes); err != nil {
		return grpcerr.FromCheck(err)
	}
	if len(cd.GetSshKeys()) > maxSSHKeys {
		return bad("params.deploy.config_drive.ssh_keys", grpcerr.ReasonOutOfRange, fmt.Sprintf("%d SSH keys, at most %d", len(cd.GetSshKeys()), maxSSHKeys))
	}
	for i, k := range cd.GetSshKeys() {
		f := fmt.Sprintf("params.deploy.config_drive.ssh_keys[%d]", i)
		if !strings.HasPrefix(k, "ssh-") && !strings.HasPrefix(k, "ecdsa-") && !strings.HasPrefix(k, "sk-") {
			return bad(f, grpcerr.ReasonInvalidValue, f+" is not an OpenSSH public key (ssh-ed25519 AAAA..., ssh-rsa ..., ecdsa-...)")
		}
		if err := textcheck.Line(f, k, 16<<10); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	return nil
}

// checkNovaCreateParams validates NOVA_CREATE's server: an image or a
// template, names of at most 255 bytes, user data, metadata and network
// ids (UUIDs).
func checkNovaCreateParams(n *ironlinkv1.NovaCreateParams) error {
	if n.GetImage() == "" && n.GetTemplate() == "" {
		return bad("params.nova_create.image", grpcerr.ReasonRequired, "NOVA_CREATE needs params.nova_create.image (image name or id) or a template")
	}
	if errs := novatemplate.CheckMetadata("params.nova_create.metadata", n.GetMetadata()); len(errs) > 0 {
		return bad("params.nova_create.metadata", grpcerr.ReasonInvalidValue, errs[0].Error())
	}
	for _, s := range []struct{ f, v string }{{"name", n.GetName()}, {"flavor", n.GetFlavor()}, {"image", n.GetImage()}, {"key_name", n.GetKeyName()}, {"template", n.GetTemplate()}} {
		if err := textcheck.Line("params.nova_create."+s.f, s.v, 255); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	if err := textcheck.Text("params.nova_create.user_data", n.GetUserData(), MaxUserDataBytes); err != nil {
		return grpcerr.FromCheck(err)
	}
	if len(n.GetNetworks()) > maxNetworks {
		return bad("params.nova_create.networks", grpcerr.ReasonOutOfRange, fmt.Sprintf("%d networks, at most %d", len(n.GetNetworks()), maxNetworks))
	}
	for i, id := range n.GetNetworks() {
		if _, err := uuid.Parse(id); err != nil {
			f := fmt.Sprintf("params.nova_create.networks[%d]", i)
			return bad(f, grpcerr.ReasonNotUUID, f+" "+textcheck.Quote(id)+" is not a network id (UUID)")
		}
	}
	return nil
}
