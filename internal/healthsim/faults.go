package healthsim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ironlink/ironlink/gen/datamodels"
)

// Fault is one kind of health event a checker on the node reports, in
// NVSentinel's vocabulary: its agent, component class, check name, error
// code, whether it is fatal and what it recommends.
type Fault struct {
	// Name is the simulator's name for it, e.g. "xid79".
	Name string
	// Agent is the reporting monitor, e.g. "syslog-health-monitor".
	Agent string
	// ComponentClass and Check name the health condition the hub keeps
	// (docs/reference/conditions.md "Health conditions").
	ComponentClass, Check string
	// Code is the event's one error code, e.g. "79".
	Code string
	// Fatal faults make the device FAULTED; the others are warnings.
	Fatal bool
	// Action is NVSentinel's recommended action.
	Action datamodels.RecommendedAction
	// Message is the checker's text.
	Message string
	// GPU tells whether the event names a GPU (index and UUID) as the
	// impacted entity; the others name the component by its class.
	GPU bool
}

// Catalog is every fault the simulator sends, in the order `health --list`
// prints them: the GPU XID errors that take GPU machines out of service
// (79 fell off the bus, 48 double-bit ECC, 63/64 row remapping, 94/95
// contained/uncontained ECC), an NVLink error, a thermal warning and a
// failed power supply, with the agents, checks and codes NVSentinel's
// monitors use.
var Catalog = []Fault{
	{Name: "xid79", Agent: "syslog-health-monitor", ComponentClass: "GPU", Check: "SysLogsXIDError", Code: "79", Fatal: true,
		Action: datamodels.RecommendedAction_RESTART_BM, Message: "XID 79: GPU has fallen off the bus", GPU: true},
	{Name: "xid48", Agent: "syslog-health-monitor", ComponentClass: "GPU", Check: "SysLogsXIDError", Code: "48", Fatal: true,
		Action: datamodels.RecommendedAction_COMPONENT_RESET, Message: "XID 48: double-bit ECC error", GPU: true},
	{Name: "xid63", Agent: "syslog-health-monitor", ComponentClass: "GPU", Check: "SysLogsXIDError", Code: "63", Fatal: false,
		Action: datamodels.RecommendedAction_NONE, Message: "XID 63: row remapping recorded (pending remap, reset to apply)", GPU: true},
	{Name: "xid64", Agent: "syslog-health-monitor", ComponentClass: "GPU", Check: "SysLogsXIDError", Code: "64", Fatal: true,
		Action: datamodels.RecommendedAction_RESTART_BM, Message: "XID 64: row remapping failure", GPU: true},
	{Name: "xid94", Agent: "syslog-health-monitor", ComponentClass: "GPU", Check: "SysLogsXIDError", Code: "94", Fatal: false,
		Action: datamodels.RecommendedAction_RESTART_APP, Message: "XID 94: contained ECC error (the application was stopped)", GPU: true},
	{Name: "xid95", Agent: "syslog-health-monitor", ComponentClass: "GPU", Check: "SysLogsXIDError", Code: "95", Fatal: true,
		Action: datamodels.RecommendedAction_RESTART_BM, Message: "XID 95: uncontained ECC error", GPU: true},
	{Name: "nvlink", Agent: "gpu-health-monitor", ComponentClass: "GPU", Check: "GpuNvlinkWatch", Code: "DCGM_FR_NVLINK_DOWN", Fatal: true,
		Action: datamodels.RecommendedAction_COMPONENT_RESET, Message: "NVLink link 4 is down", GPU: true},
	{Name: "thermal", Agent: "gpu-health-monitor", ComponentClass: "GPU", Check: "GpuThermalWatch", Code: "DCGM_FR_CLOCK_THROTTLE_THERMAL", Fatal: false,
		Action: datamodels.RecommendedAction_NONE, Message: "clocks throttled: GPU temperature 92 C", GPU: true},
	{Name: "psu", Agent: "bmc-sel-monitor", ComponentClass: "PSU", Check: "PowerSupplyRedundancy", Code: "PSU_FAILURE", Fatal: false,
		Action: datamodels.RecommendedAction_CONTACT_SUPPORT, Message: "PSU 2 failed: power supply redundancy lost"},
}

// Lookup returns the catalog's fault named name, or an error naming the
// known ones.
func Lookup(name string) (Fault, error) {
	i := slices.IndexFunc(Catalog, func(f Fault) bool { return f.Name == name })
	if i < 0 {
		names := make([]string, len(Catalog))
		for j, f := range Catalog {
			names[j] = f.Name
		}
		return Fault{}, fmt.Errorf("unknown fault %q (known: %s)", name, strings.Join(names, ", "))
	}
	return Catalog[i], nil
}

// Event is f for the node named node (a host name or an IP address, which
// the hub maps to a device of the satellite's site; docs/reference/health.md
// "Which device") on GPU index gpu, generated at, as NVSentinel's monitors
// send it. healthy makes it the check's all-clear (not fatal, no code), which
// clears the condition.
func (f Fault) Event(node string, gpu int, at time.Time, healthy bool) *datamodels.HealthEvent {
	e := &datamodels.HealthEvent{Version: 1, Agent: f.Agent, ComponentClass: f.ComponentClass, CheckName: f.Check,
		IsFatal: f.Fatal, Message: f.Message, RecommendedAction: f.Action, ErrorCode: []string{f.Code},
		GeneratedTimestamp: timestamppb.New(at), NodeName: node,
		ProcessingStrategy: datamodels.ProcessingStrategy_EXECUTE_REMEDIATION}
	if f.GPU {
		e.EntitiesImpacted = []*datamodels.Entity{{EntityType: "GPU", EntityValue: fmt.Sprint(gpu)},
			{EntityType: "GPU_UUID", EntityValue: gpuUUID(node, gpu)}}
	} else {
		e.EntitiesImpacted = []*datamodels.Entity{{EntityType: f.ComponentClass, EntityValue: "2"}}
	}
	if healthy {
		e.IsFatal, e.IsHealthy, e.ErrorCode = false, true, nil
		e.RecommendedAction = datamodels.RecommendedAction_NONE
		e.Message = f.Check + " passed"
	}
	return e
}

// gpuUUID is a stable made-up GPU UUID for a node's GPU, shaped like
// nvidia-smi's "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func gpuUUID(node string, gpu int) string {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(fmt.Sprintf("%s/%d", node, gpu)) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	s := fmt.Sprintf("%016x%016x", h, h*31+7)
	return fmt.Sprintf("GPU-%s-%s-%s-%s-%s", s[0:8], s[8:12], s[12:16], s[16:20], s[20:32])
}
