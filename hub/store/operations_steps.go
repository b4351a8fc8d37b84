package store

import (
	"encoding/json"
	"fmt"
)

// MaxStoredSteps bounds the steps an operation keeps across attempts; the
// oldest steps of earlier attempts go first beyond it.
const MaxStoredSteps = 300

// mergeSteps is the step list to store when a progress brings incoming
// (protojson OperationStep objects, each with the delivery attempt it
// started under): the steps of stored from attempts before the earliest
// attempt in incoming — taken by a satellite process that has since ended,
// which the reporting process does not know — followed by incoming, which
// replaces the rest. Steps without an attempt (satellites before attempts
// were recorded) count as attempt 0; incoming without any attempt replaces
// stored whole, as before. At most MaxStoredSteps, the oldest dropped.
func mergeSteps(stored, incoming json.RawMessage) (json.RawMessage, error) {
	var in []json.RawMessage
	if err := json.Unmarshal(incoming, &in); err != nil {
		return nil, fmt.Errorf("decode steps: %w", err)
	}
	first := int32(-1)
	for _, s := range in {
		if a := stepAttempt(s); first < 0 || a < first {
			first = a
		}
	}
	var old, out []json.RawMessage
	if first > 0 && len(stored) > 0 {
		if err := json.Unmarshal(stored, &old); err != nil {
			old = nil // an unreadable stored list is replaced
		}
	}
	for _, s := range old {
		if stepAttempt(s) < first {
			out = append(out, s)
		}
	}
	out = append(out, in...)
	if len(out) > MaxStoredSteps {
		out = out[len(out)-MaxStoredSteps:]
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode steps: %w", err)
	}
	return b, nil
}

// stepAttempt is a stored step's attempt (0 when it has none).
func stepAttempt(raw json.RawMessage) int32 {
	var s struct {
		Attempt int32 `json:"attempt"`
	}
	_ = json.Unmarshal(raw, &s)
	return s.Attempt
}
