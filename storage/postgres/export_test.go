package postgres

// WithGoCorrelatedRules makes the store keep the correlated lane's
// contract by package backend's Go rules (RegisterWaits, CorrelatedPut)
// instead of commitWaitSQL and putDeliverSQL, so that the tests can hold
// both to the same cases.
func WithGoCorrelatedRules() Option {
	return func(c *config) { c.goCorrelated = true }
}
