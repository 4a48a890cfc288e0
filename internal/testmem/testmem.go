// Package testmem measures what a test's code allocates, for tests that
// hold a decoder or a read path to a bound on the memory an input can
// make it take (a corrupt length must never cost what it claims).
package testmem

import "runtime"

// Allocated returns the bytes the process allocated while fn ran
// (runtime.MemStats.TotalAlloc, which only grows): fn's own, and any
// other goroutine's meanwhile, so a test keeps its bound well above what
// fn should take and well below what the fault it guards against costs.
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
