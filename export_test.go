package herald

// SetDeadLetterBatch sets the batch size of bulk dead-letter operations
// until the returned function restores it.
func SetDeadLetterBatch(n int) (restore func()) {
	old := deadLetterBatch
	deadLetterBatch = n
	return func() { deadLetterBatch = old }
}

// OnAdmit makes rt's door call fn each time it checks an event against
// its definition (admission.onAdmit). Call it before rt starts.
func OnAdmit(rt *Runtime, fn func(tenant, name string)) { rt.door.onAdmit = fn }
