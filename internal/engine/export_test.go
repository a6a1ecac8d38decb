package engine

// SetViewBatch sets how many view entries one transaction of a view
// rewrite stages or sweeps, until the returned function restores it.
func SetViewBatch(n int) (restore func()) {
	prev := viewBatch
	viewBatch = n
	return func() { viewBatch = prev }
}
