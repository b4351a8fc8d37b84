package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
)

// The desired state's statements go to PostgreSQL in one round trip
// (issue 26 item 1): the device row is locked by the first of them until
// the transaction ends, and a group committing condition ingest that
// touches the device waits for that lock, so the fewer round trips the
// lock spans, the less either waits for the other. Then one more round
// trip when the status changes.
const (
	setDesiredDeviceSQL = `
		UPDATE devices SET desired_impairment = $2, desired_generation = desired_generation + 1
		WHERE id = $1 RETURNING site, desired_generation`
	setDesiredSupersedeSQL = `
		UPDATE commands SET state = 'SUPERSEDED', updated_at = now(), completed_at = now()
		WHERE device_id = $1 AND state IN ('PENDING', 'SENT', 'FAILED')`
	// The command with the generation just taken, and its impairment
	// history entry.
	setDesiredCommandSQL = `
		WITH c AS (
			INSERT INTO commands (device_id, site, generation, desired, actor, reason, source, traceparent, tracestate, action, holder)
			SELECT d.id, d.site, d.desired_generation, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text
			FROM devices d WHERE d.id = $1
			RETURNING *),
		h AS (
			INSERT INTO impairment_history (device_id, desired, generation, actor, reason, source, command_id, action, holder)
			SELECT device_id, desired, generation, actor, reason, source, id, action, holder FROM c)
		SELECT ` + commandColumns + ` FROM c`
	setDesiredConditionsSQL = `
		SELECT device_id::text, type, status, reason, message, last_transition_time, observed_time, observed_generation, health::text
		FROM device_conditions WHERE device_id = $1`
	setDesiredStateSQL = `
		SELECT d.status, d.status_reason, d.desired_impairment, s.stale
		FROM devices d JOIN sites s ON s.name = d.site WHERE d.id = $1`
	setDesiredNotifySQL = `SELECT pg_notify($1, site) FROM devices WHERE id = $2`
)

// setDesiredTx sets device deviceID's desired state inside tx: the next
// generation, older open commands SUPERSEDED, a PENDING command and an
// impairment history entry with a's action, holder, actor, reason and
// source, the status re-derived, the site notified. It does not touch the
// holds (holds.go does). Errors: ErrNotFound.
func (s *Store) setDesiredTx(ctx context.Context, tx pgx.Tx, deviceID string, desired Impairment, a ImpairmentAction) (Command, error) {
	// The caller's W3C trace context goes with the command (see TraceParent).
	tc := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, tc)
	b := &pgx.Batch{}
	b.Queue(setDesiredDeviceSQL, deviceID, string(desired))
	b.Queue(setDesiredSupersedeSQL, deviceID)
	b.Queue(setDesiredCommandSQL, deviceID, string(desired), a.Actor, a.Reason, a.Source, tc.Get("traceparent"), tc.Get("tracestate"),
		string(a.Action), a.Holder)
	b.Queue(setDesiredConditionsSQL, deviceID)
	b.Queue(setDesiredStateSQL, deviceID)
	b.Queue(setDesiredNotifySQL, NotifyChannel, deviceID)
	br := tx.SendBatch(ctx, b)
	cmd, changes, err := readSetDesired(br, deviceID)
	if err != nil {
		br.Close()
		return Command{}, err
	}
	if err := br.Close(); err != nil {
		return Command{}, fmt.Errorf("set desired state of device %s: %w", deviceID, err)
	}
	sb := &pgx.Batch{}
	if changes.queue(sb) > 0 {
		if err := tx.SendBatch(ctx, sb).Close(); err != nil {
			return Command{}, fmt.Errorf("record status changes: %w", err)
		}
	}
	return cmd, nil
}

// readSetDesired reads the results of setDesiredTx's batch: the command
// written and the device's status change, if any.
func readSetDesired(br pgx.BatchResults, deviceID string) (Command, statusRows, error) {
	var site string
	var gen int64
	err := br.QueryRow().Scan(&site, &gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return Command{}, statusRows{}, fmt.Errorf("device %s: %w", deviceID, ErrNotFound)
	}
	if err != nil {
		return Command{}, statusRows{}, fmt.Errorf("set desired state of device %s: %w", deviceID, err)
	}
	if _, err := br.Exec(); err != nil {
		return Command{}, statusRows{}, fmt.Errorf("supersede older commands of device %s: %w", deviceID, err)
	}
	cmd, err := scanCommand(br.QueryRow())
	if err != nil {
		return Command{}, statusRows{}, fmt.Errorf("insert command: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return Command{}, statusRows{}, fmt.Errorf("load conditions: %w", err)
	}
	conds, err := scanConditions(rows)
	if err != nil {
		return Command{}, statusRows{}, err
	}
	var st devState
	var stale bool
	if err := br.QueryRow().Scan(&st.status, &st.reason, &st.desired, &stale); err != nil {
		return Command{}, statusRows{}, fmt.Errorf("load device state of %s: %w", deviceID, err)
	}
	var changes statusRows
	changes.derive(deviceID, st, conds[deviceID], stale)
	if _, err := br.Exec(); err != nil {
		return Command{}, statusRows{}, fmt.Errorf("notify site %q: %w", site, err)
	}
	return cmd, changes, nil
}
