package simulation

import "math/rand/v2"

// Options change what a run of (seed, run) does beyond its operations.
type Options struct {
	// keepTrace, in tests, keeps every file call of the run in
	// Result.Lines, to show where two executions part.
	keepTrace bool
}

// opRand is operation i's random source: a function of (seed, run, i)
// alone, so an operation draws the same numbers, the same kind of
// operation first, whichever operations ran before it; what its numbers
// choose among (a topic, a leased offset) is the model's state at that
// point.
func opRand(seed uint64, run, i int) *rand.Rand {
	return rand.New(rand.NewPCG(mix(seed, uint64(run)), mix(uint64(i), 0x6f70)))
}

// mix is splitmix64's finalizer over a and b: independent streams from
// neighbouring indices.
func mix(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 + b + 0x632be59bd9b4e019
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
