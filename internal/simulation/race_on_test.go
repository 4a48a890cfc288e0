//go:build race

package simulation

// raceDetector: the race detector slows the engine about tenfold, so the
// simulation runs fewer runs under it; CI runs the full budget without it.
const raceDetector = true
