package herald

// SetDeadLetterBatch sets the batch size of bulk dead-letter operations
// until the returned function restores it.
func SetDeadLetterBatch(n int) (restore func()) {
	old := deadLetterBatch
	deadLetterBatch = n
	return func() { deadLetterBatch = old }
}
