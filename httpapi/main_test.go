package httpapi

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	poisonReleasedBodies = true // a record used after its body's release reads as garbage
	goleak.VerifyTestMain(m)
}
