//go:build !race

package campaign

const raceDetector = false
