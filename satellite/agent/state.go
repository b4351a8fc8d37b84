package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
)

// appliedState is the on-disk form of the generations a satellite applied,
// so that a restarted satellite remembers them (StatePath).
type appliedState struct {
	// Devices maps Ironic node UUID → last applied command.
	Devices map[string]appliedDevice `json:"devices"`
	// Orphans are the sweep's suspected and reported instance mismatches,
	// so a restarted satellite neither drops reported orphans nor restarts
	// their two-sweep count and first-seen time.
	Orphans []orphanRecord `json:"orphans,omitempty"`
}

// orphanRecord is one suspected (Reported false) or reported mismatch.
type orphanRecord struct {
	Node               string    `json:"node"`
	Kind               string    `json:"kind"` // InstanceMismatchKind name
	Server             string    `json:"server"`
	IronicInstanceUUID string    `json:"ironic_instance_uuid,omitempty"`
	ServerStatus       string    `json:"server_status,omitempty"`
	ProjectID          string    `json:"project_id,omitempty"`
	FirstSeen          time.Time `json:"first_seen"`
	Reported           bool      `json:"reported,omitempty"`
}

type appliedDevice struct {
	Quarantined bool  `json:"quarantined"`
	Generation  int64 `json:"generation"`
	// Pending: the hub's desired state is known (from a resync) but the
	// satellite has not made OpenStack match it yet. Files written before
	// this field existed hold applied states only.
	Pending bool `json:"pending,omitempty"`
	// LeftAlone: a release that leaves the trait alone
	// (IMPAIRMENT_STATE_RELEASED_UNOFFERED).
	LeftAlone bool `json:"left_alone,omitempty"`
}

// LoadState reads the applied generations and the orphan sweep's memory
// from cfg.StatePath (a JSON file);
// a missing file is an empty state. Errors: unreadable or malformed file.
func (a *Agent) LoadState() error {
	st, err := readState(a.cfg.StatePath)
	if err != nil {
		return err
	}
	a.cmds.mu.Lock()
	defer a.cmds.mu.Unlock()
	a.orphans.mu.Lock()
	defer a.orphans.mu.Unlock()
	for id, d := range st.Devices {
		a.cmds.desired[id] = desired{quarantined: d.Quarantined, leftAlone: d.LeftAlone, generation: d.Generation, applied: !d.Pending}
	}
	for _, o := range st.Orphans {
		kind := ironlinkv1.InstanceMismatchKind(ironlinkv1.InstanceMismatchKind_value[o.Kind])
		if kind == ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_UNSPECIFIED || o.Node == "" {
			continue
		}
		a.orphans.suspects[mismatchKey{node: o.Node, kind: kind, server: o.Server}] = o.FirstSeen
		if o.Reported && len(a.orphans.mismatches[o.Node]) < maxMismatchesPerDevice {
			a.orphans.mismatches[o.Node] = append(a.orphans.mismatches[o.Node], &ironlinkv1.InstanceMismatch{Kind: kind,
				IronicInstanceUuid: o.IronicInstanceUUID, NovaServerId: o.Server, NovaServerStatus: o.ServerStatus,
				NovaProjectId: o.ProjectID, FirstSeenTime: timestamppb.New(o.FirstSeen)})
		}
	}
	return nil
}

// readState reads a state file; "" or a missing file is an empty state.
func readState(path string) (appliedState, error) {
	var st appliedState
	if path == "" {
		return st, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read state file: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("state file %s is malformed: %w (move it away to start without it: the satellite then takes the desired states the hub sends after Welcome; only its record of what it applied and of reported orphans starts afresh)", path, err)
	}
	return st, nil
}

// ReadAppliedGenerations returns the applied generations kept in the state
// file at path (see Config.StatePath), for a Hello sent before the agent
// exists. Errors: unreadable or malformed file.
func ReadAppliedGenerations(path string) ([]*ironlinkv1.AppliedGeneration, error) {
	st, err := readState(path)
	if err != nil {
		return nil, err
	}
	out := make([]*ironlinkv1.AppliedGeneration, 0, len(st.Devices))
	for id, d := range st.Devices {
		if !d.Pending {
			out = append(out, &ironlinkv1.AppliedGeneration{DeviceId: id, Generation: d.Generation})
		}
	}
	return out, nil
}

// takeState takes a copy of what the state file keeps (desired states,
// orphan memory) and numbers it; write it with saveState, so that no file
// I/O (the fsync) runs under a lock of the agent's state. It takes cmds.mu
// and orphans.mu: callers may hold view.mu, not those.
func (a *Agent) takeState() pendingState {
	if a.cfg.StatePath == "" {
		return pendingState{}
	}
	a.cmds.mu.Lock()
	defer a.cmds.mu.Unlock()
	a.orphans.mu.Lock()
	defer a.orphans.mu.Unlock()
	st := appliedState{Devices: make(map[string]appliedDevice, len(a.cmds.desired))}
	for id, d := range a.cmds.desired {
		st.Devices[id] = appliedDevice{Quarantined: d.quarantined, LeftAlone: d.leftAlone, Generation: d.generation, Pending: !d.applied}
	}
	reported := map[mismatchKey]bool{}
	for node, ms := range a.orphans.mismatches {
		for _, m := range ms {
			k := mismatchKey{node: node, kind: m.GetKind(), server: m.GetNovaServerId()}
			reported[k] = true
			st.Orphans = append(st.Orphans, orphanRecord{Node: node, Kind: m.GetKind().String(), Server: m.GetNovaServerId(),
				IronicInstanceUUID: m.GetIronicInstanceUuid(), ServerStatus: m.GetNovaServerStatus(), ProjectID: m.GetNovaProjectId(),
				FirstSeen: m.GetFirstSeenTime().AsTime(), Reported: true})
		}
	}
	for k, first := range a.orphans.suspects {
		if !reported[k] {
			st.Orphans = append(st.Orphans, orphanRecord{Node: k.node, Kind: k.kind.String(), Server: k.server, FirstSeen: first})
		}
	}
	sort.Slice(st.Orphans, func(i, j int) bool {
		if st.Orphans[i].Node != st.Orphans[j].Node {
			return st.Orphans[i].Node < st.Orphans[j].Node
		}
		return st.Orphans[i].Server < st.Orphans[j].Server
	})
	a.cmds.stateSeq++
	return pendingState{st: &st, seq: a.cmds.stateSeq}
}

// pendingState is a numbered copy of the state to write (takeState).
type pendingState struct {
	st  *appliedState // nil: no state file configured
	seq uint64
}

// saveState writes p atomically (temp file, fsync, rename) unless a newer
// copy has been written already (copies taken later carry everything an
// earlier one has). Safe for concurrent use; must not be called with a lock of
// the agent's state held.
func (a *Agent) saveState(p pendingState) error {
	if p.st == nil {
		return nil
	}
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	if p.seq <= a.savedSeq {
		return nil
	}
	err := writeState(a.cfg.StatePath, *p.st)
	a.noteStateWrite(err)
	if err != nil {
		return err
	}
	a.savedSeq = p.seq
	return nil
}

// Reasons of the StateFileWritten site condition.
const (
	ReasonStateWritten     = "Written"
	ReasonStateWriteFailed = "WriteFailed"
)

// noteStateWrite sets the StateFileWritten site condition after a write of
// the state file (err its failure, nil for success): on the first write
// and whenever it changes from failed to written or back, or to another
// error (a.saveMu held).
func (a *Agent) noteStateWrite(err error) {
	if a.site == nil {
		return
	}
	msg := "state file " + a.cfg.StatePath + " written"
	c := condition.Condition{Type: condition.StateFileWritten, Status: condition.True, Reason: ReasonStateWritten, Message: msg}
	if err != nil {
		msg = "state file " + a.cfg.StatePath + " not written (" + err.Error() + "): the satellite keeps serving, but a restart would " +
			"forget applied generations and orphan sweep memory since the last write; the next write retries"
		c = condition.Condition{Type: condition.StateFileWritten, Status: condition.False, Reason: ReasonStateWriteFailed, Message: msg}
	}
	if msg == a.stateMsg {
		return
	}
	a.stateMsg = msg
	a.site.Set(c)
}

// writeState replaces the state file at path with st.
func writeState(path string, st appliedState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ironlink-state-*")
	if err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write state file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace state file: %w", err)
	}
	return nil
}

// AppliedGenerations lists the applied generation of every device the
// satellite has applied a desired state to (for the link's Hello); states
// known but not applied yet are left out.
func (a *Agent) AppliedGenerations() []*ironlinkv1.AppliedGeneration {
	a.cmds.mu.Lock()
	defer a.cmds.mu.Unlock()
	out := make([]*ironlinkv1.AppliedGeneration, 0, len(a.cmds.desired))
	for id, d := range a.cmds.desired {
		if d.applied {
			out = append(out, &ironlinkv1.AppliedGeneration{DeviceId: id, Generation: d.generation})
		}
	}
	return out
}
