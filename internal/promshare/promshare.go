// Package promshare registers collectors so that several nodes (or loops)
// on one Prometheus registerer share them instead of panicking.
package promshare

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg and returns it; if a collector of the same
// description is registered already (two nodes on one registry, say), it
// returns that one instead, so they count into the same series. A nil reg
// registers nothing. A conflicting registration (same name, other labels)
// is a programming error and panics.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		if already, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("register metric: %v", err))
	}
	return c
}
