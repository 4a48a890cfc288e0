//go:build race

package campaign

// raceDetector: the race detector slows the engine about tenfold, so the
// campaign thins its states under it; CI runs the full budget without it.
const raceDetector = true
