-- Herald schema, version 10: the sender of an event a workflow sent to
-- another instance (ctx.RaiseEvent, ctx.Enqueue; storage.TurnSend), shown
-- in the receiver's fate ledger (EventRecord.Sender).

-- sender: the sending instance's id (same tenant); '' for an event a
-- client sent.
ALTER TABLE events ADD COLUMN sender TEXT NOT NULL DEFAULT '';
