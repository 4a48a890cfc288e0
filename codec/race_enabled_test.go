//go:build race

package codec

// raceEnabled loosens allocation counts: under the race detector sync.Pool
// drops a share of what is put back, so pooled buffers get allocated again.
const raceEnabled = true
