package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ironlink/ironlink/hub/status"
)

// QuarantineRecord is the quarantine in force on a device: the newest
// impairment history entry (who, why, when, from where) and how far its
// command has got.
type QuarantineRecord struct {
	ImpairmentChange
	// CommandState is the command's state now; LastError its last error.
	CommandState CommandState
	LastError    string
	// Applied is true when the site reported the generation applied.
	Applied bool
}

// StatusContext is what explains a device's status beyond its own row and
// conditions (docs/design/requirements.md "Explaining and replaying").
type StatusContext struct {
	// DeviceID names the device.
	DeviceID string
	// Status is the device's stored status.
	Status status.Status
	// Message is the message of the condition behind the status (the rule's
	// condition, status.Rule.Condition; for UNREACHABLE the one behind the
	// last known status); "" when none or empty.
	Message string
	// Fault is Ironic's fault field of the device ("" when none).
	Fault string
	// SiteStale and SiteLastSeen are the site's liveness.
	SiteStale    bool
	SiteLastSeen *time.Time
	// LastKnownStatus is the status before the site fell silent.
	LastKnownStatus status.Status
	// Quarantine is set when the desired impairment is QUARANTINED.
	Quarantine *QuarantineRecord
}

// ruleConditions pairs every status with the condition type its rule looks
// at, for the query below (status.Rule.Condition).
func ruleConditions() (sts, types []string) {
	for _, st := range status.All {
		if t := status.RuleFor(st).Condition(); t != "" {
			sts, types = append(sts, string(st)), append(types, string(t))
		}
	}
	return sts, types
}

// StatusContexts returns the StatusContext of each of ids (device UUIDs)
// that exists, by id, in one query: the short form of "why" for a page of
// ListDevices. Errors are database errors.
func (s *Store) StatusContexts(ctx context.Context, ids []string) (map[string]StatusContext, error) {
	out := make(map[string]StatusContext, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	sts, types := ruleConditions()
	rows, err := s.pool.Query(ctx, `
		WITH rc AS (SELECT * FROM unnest($2::text[], $3::text[]) AS rc(status, type))
		SELECT d.id::text, d.status, COALESCE(d.last_known_status, ''), COALESCE(c.message, ''),
			COALESCE(d.facts->>'fault', ''), s.stale, s.last_seen_at,
			q.desired IS NOT NULL, COALESCE(q.desired, ''), COALESCE(q.generation, 0), COALESCE(q.actor, ''),
			COALESCE(q.reason, ''), COALESCE(q.source, ''), COALESCE(q.command_id::text, ''), COALESCE(q.changed_at, now()),
			COALESCE(cmd.state, ''), COALESCE(cmd.last_error, ''), d.applied_generation >= COALESCE(q.generation, 0)
		FROM devices d
		JOIN sites s ON s.name = d.site
		LEFT JOIN rc ON rc.status = CASE WHEN d.status = 'UNREACHABLE' THEN d.last_known_status ELSE d.status END
		LEFT JOIN device_conditions c ON c.device_id = d.id AND c.type = rc.type
		LEFT JOIN LATERAL (SELECT desired, generation, actor, reason, source, command_id, changed_at
			FROM impairment_history i WHERE d.desired_impairment = 'QUARANTINED'
				AND i.device_id = d.id AND i.desired = 'QUARANTINED' AND i.action <> 'RELEASE'
			ORDER BY i.id DESC LIMIT 1) q ON true -- the newest quarantine, not a release of one of its holds
			-- (the device's own condition inside: a one-time filter, no index probe for the others)
		LEFT JOIN commands cmd ON cmd.id = q.command_id
		WHERE d.id = ANY($1::uuid[])`, ids, sts, types)
	if err != nil {
		return nil, fmt.Errorf("status contexts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sc StatusContext
		var st, lks, desired, cmdState string
		var hasQ bool
		var q QuarantineRecord
		if err := rows.Scan(&sc.DeviceID, &st, &lks, &sc.Message, &sc.Fault, &sc.SiteStale, &sc.SiteLastSeen,
			&hasQ, &desired, &q.Generation, &q.Actor, &q.Reason, &q.Source, &q.CommandID, &q.ChangedAt,
			&cmdState, &q.LastError, &q.Applied); err != nil {
			return nil, fmt.Errorf("status contexts: %w", err)
		}
		sc.Status, sc.LastKnownStatus = status.Status(st), status.Status(lks)
		if hasQ {
			q.Desired, q.CommandState = Impairment(desired), CommandState(cmdState)
			sc.Quarantine = &q
		}
		out[sc.DeviceID] = sc
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("status contexts: %w", err)
	}
	return out, nil
}

// StatusContextOf is StatusContexts for one device. Errors: ErrNotFound.
func (s *Store) StatusContextOf(ctx context.Context, id string) (StatusContext, error) {
	m, err := s.StatusContexts(ctx, []string{id})
	if err != nil {
		return StatusContext{}, err
	}
	sc, ok := m[id]
	if !ok {
		return StatusContext{}, fmt.Errorf("device %s: %w", id, ErrNotFound)
	}
	return sc, nil
}
