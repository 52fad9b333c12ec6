package postgres

// WithGoReferenceRules makes the store keep every rule that has a Go
// reference in package backend by that reference instead of its SQL (the
// correlated lane's RegisterWaits and CorrelatedPut instead of
// commitWaitSQL and putDeliverSQL), so that the conformance suite holds
// both to the same cases.
func WithGoReferenceRules() Option {
	return func(c *config) { c.goRules = true }
}

// WithForcedCommitBatch makes every commit that may share a transaction
// (commitCall.batchable) run through the batch path, commitBatch, even
// alone: a batch of simple commits is one herald_commit_many call, any
// other batch queueCommit's statements, and a failed batch falls back to
// each commit alone. The suite then drives those paths on every case.
func WithForcedCommitBatch() Option {
	return func(c *config) { c.forceBatch = true }
}

// WithFunctions makes Open apply src in place of functions.sql.
func WithFunctions(src string) Option {
	return func(c *config) { c.functions = src }
}

// FunctionsSQL is functions.sql as embedded.
var FunctionsSQL = functionsSQL
