package operations

import (
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/wire"
)

// Redacted replaces every driver_info value the hub shows or stores.
const Redacted = "***"

// KindToStore is the stored name of k ("ENROL", ...); "" for UNSPECIFIED
// or a value the contract does not define.
func KindToStore(k ironlinkv1.OperationKind) store.OperationKind {
	n, _ := wire.EnumToName[store.OperationKind](k, ironlinkv1.OperationKind_name, "OPERATION_KIND_")
	return n
}

// KindFromStore is the proto value of the stored kind k (UNSPECIFIED when unknown).
func KindFromStore(k store.OperationKind) ironlinkv1.OperationKind {
	return wire.EnumFromName[ironlinkv1.OperationKind](k, ironlinkv1.OperationKind_value, "OPERATION_KIND_")
}

// StateToStore is the stored name of s; "" for UNSPECIFIED or unknown.
func StateToStore(s ironlinkv1.OperationState) store.OperationState {
	n, _ := wire.EnumToName[store.OperationState](s, ironlinkv1.OperationState_name, "OPERATION_STATE_")
	return n
}

// StateFromStore is the proto value of the stored state s.
func StateFromStore(s store.OperationState) ironlinkv1.OperationState {
	return wire.EnumFromName[ironlinkv1.OperationState](s, ironlinkv1.OperationState_value, "OPERATION_STATE_")
}

// RedactNode returns a copy of n with every driver_info value replaced by
// Redacted (the keys kept): what the hub stores and shows.
func RedactNode(n *ironlinkv1.NodeSpec) *ironlinkv1.NodeSpec {
	if n == nil {
		return nil
	}
	c := proto.Clone(n).(*ironlinkv1.NodeSpec)
	for k := range c.DriverInfo {
		c.DriverInfo[k] = Redacted
	}
	return c
}

// marshal encodes m as protojson for a jsonb column (nil for nil).
func marshal(m proto.Message) (json.RawMessage, error) {
	if m == nil {
		return nil, nil
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", m, err)
	}
	return b, nil
}

// MarshalSteps encodes steps as the stored JSON list.
func MarshalSteps(steps []*ironlinkv1.OperationStep) (json.RawMessage, error) {
	parts := make([]string, 0, len(steps))
	for _, s := range steps {
		b, err := protojson.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("encode step: %w", err)
		}
		parts = append(parts, string(b))
	}
	return json.RawMessage("[" + strings.Join(parts, ",") + "]"), nil
}

// unmarshalSteps decodes the stored JSON list; nil on any error (a row the
// code can no longer read shows no steps rather than failing the call).
func unmarshalSteps(raw json.RawMessage) []*ironlinkv1.OperationStep {
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil
	}
	out := make([]*ironlinkv1.OperationStep, 0, len(parts))
	for _, p := range parts {
		s := &ironlinkv1.OperationStep{}
		if protojson.Unmarshal(p, s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// NodeOf decodes an operation's stored (redacted) node spec; nil when none.
func NodeOf(o store.Operation) *ironlinkv1.NodeSpec {
	if o.Node == nil {
		return nil
	}
	n := &ironlinkv1.NodeSpec{}
	if protojson.Unmarshal(o.Node, n) != nil {
		return nil
	}
	return n
}

// ParamsOf decodes an operation's stored parameters; nil when none.
func ParamsOf(o store.Operation) *ironlinkv1.OperationParams {
	p := &ironlinkv1.OperationParams{}
	if len(o.Params) == 0 || protojson.Unmarshal(o.Params, p) != nil {
		return nil
	}
	if proto.Size(p) == 0 {
		return nil
	}
	return p
}

// ToProto is the API form of a stored operation (driver_info redacted, as
// stored). hub/fleet uses it for GetDevice's recent operations.
func ToProto(o store.Operation) *ironlinkv1.Operation {
	p := &ironlinkv1.Operation{
		OperationId: o.ID, GroupId: o.GroupID, Site: o.Site, DeviceId: o.DeviceID, DeviceName: o.DeviceName,
		Kind: KindFromStore(o.Kind), Node: NodeOf(o), Params: ParamsOf(o), State: StateFromStore(o.State),
		Actor: o.Actor, Reason: o.Reason, SourceAddress: o.Source, Forced: o.Forced,
		CreateTime: timestamppb.New(o.CreatedAt), Steps: unmarshalSteps(o.Steps), LastError: o.LastError,
		Attempts: o.Attempts, ServerId: o.ServerID, ProvisionState: o.ProvisionState, CancelRequested: o.CancelRequested,
	}
	if o.StartedAt != nil {
		p.StartTime = timestamppb.New(*o.StartedAt)
	}
	if o.EndedAt != nil {
		p.EndTime = timestamppb.New(*o.EndedAt)
	}
	return p
}
