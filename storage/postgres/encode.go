package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// nonTerminal is the SQL list of statuses that can still run.
const nonTerminal = `('pending', 'running')`

// jsonArg stores v as JSON text.
func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %T: %w", v, err)
	}
	return string(b), nil
}

// failureArg stores a failure as JSON text; nil is NULL.
func failureArg(f *history.Failure) (any, error) {
	if f == nil {
		return nil, nil
	}
	return jsonArg(f)
}

// ---- instances ----

const instanceCols = `tenant, id, workflow, status, execution, input, output, failure, created_at, updated_at, blocked, parent_id, has_children, lock_token, lease_until`

// instanceRow is an instance with its lease.
type instanceRow struct {
	storage.Instance
	lockToken  *string
	leaseUntil int64
}

// scanInstance scans instanceCols, then extra.
func scanInstance(row pgx.Row, extra ...any) (*instanceRow, error) {
	var (
		r  instanceRow
		ir backend.InstanceRow
	)
	dest := append(append(ir.Dest(), &r.lockToken, &r.leaseUntil), extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	inst, err := ir.Instance()
	r.Instance = inst
	if err != nil {
		// The row was read; a column did not decode (ErrCorrupt): the
		// caller may still use the partial row, as a claim does.
		return &r, err
	}
	return &r, nil
}

// ---- history ----

// encodedHistory is events encoded for insertHistorySQL: their seqs, kinds
// and JSON documents.
type encodedHistory struct {
	seqs  []int32
	kinds []string
	docs  []string
}

// historyArgs encodes events for insertHistorySQL. Every Seq must be
// positive.
func historyArgs(evs []history.Event) (encodedHistory, error) {
	h := encodedHistory{seqs: make([]int32, len(evs)), kinds: make([]string, len(evs)), docs: make([]string, len(evs))}
	for i := range evs {
		ev := &evs[i]
		doc, err := backend.EncodeHistoryEvent(i, ev)
		if err != nil {
			return encodedHistory{}, err
		}
		h.seqs[i], h.kinds[i], h.docs[i] = int32(ev.Seq), string(ev.Kind), doc
	}
	return h, nil
}

// insertHistorySQL appends events to an execution's history: $1 tenant, $2
// instance, $3 execution, $4 seqs, $5 kinds, $6 JSON documents. A seq
// already taken fails on the primary key.
const insertHistorySQL = `INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
	SELECT $1, $2, $3, t.seq, t.kind, t.event
	FROM unnest($4::integer[], $5::text[], $6::text[]) AS t(seq, kind, event)`

// queueHistory queues the insertion of evs into execution's history.
func (b *batch) queueHistory(what, tenant, id string, execution int, evs []history.Event) error {
	h, err := historyArgs(evs)
	if err != nil {
		return err
	}
	b.queueEncodedHistory(what, tenant, id, execution, h)
	return nil
}

// queueEncodedHistory is queueHistory for events historyArgs encoded.
func (b *batch) queueEncodedHistory(what, tenant, id string, execution int, h encodedHistory) {
	b.exec(what, insertHistorySQL, tenant, id, execution, h.seqs, h.kinds, h.docs)
}

// historyConflict turns a duplicate history key into a readable error.
func historyConflict(err error, execution int) error {
	if pgConstraint(err) == "history_pkey" {
		return fmt.Errorf("append history: a seq of execution %d is already taken: %w", execution, err)
	}
	return err
}

// ---- inbox ----

const messageCols = `id, kind, execution, task_seq, lane, event_id, name, key, payload, latest, result, failure, visible_at, created_at, trace`

// scanMessage scans extra, then messageCols.
func scanMessage(row pgx.Row, extra ...any) (storage.Message, error) {
	var r backend.MessageRow
	dest := append(extra, r.Dest()...)
	if err := row.Scan(dest...); err != nil {
		return storage.Message{}, err
	}
	return r.Message()
}

// readyAtSQL is the SQL expression of an instance's ready_at (the earliest
// visible_at of its inbox) for $1 = tenant, $2 = instance id.
const readyAtSQL = `(SELECT MIN(visible_at) FROM inbox WHERE tenant = $1 AND instance_id = $2)`

// lowerReadySQL updates an instance's ready_at after a message visible at $3
// was added to its inbox. A missing instance is left alone.
const lowerReadySQL = `UPDATE instances SET ready_at = LEAST(COALESCE(ready_at, $3), $3)
	WHERE tenant = $1 AND id = $2`

// ---- events ----

const eventCols = `tenant, event_id, instance_id, lane, name, fate, reason, execution, origin_execution, wait_number, key, received_at, updated_at, sender`

func scanEvent(row pgx.Row) (*heraldtype.EventRecord, error) {
	var r backend.EventRow
	if err := row.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Event(), nil
}

// queueClear queues herald_end (migration 0007): what an ended instance
// leaves behind is cleared (its inbox; its activity tasks and correlation
// markers unless tasks, markers say it has none). With check it aborts the
// batch with codeEndDrops if the instance still has an event to drop.
func (b *batch) queueClear(tenant, id string, tasks, markers, check bool) {
	b.exec("end instance", `SELECT herald_end($1, $2, $3, $4, $5)`, tenant, id, tasks, markers, check)
}
