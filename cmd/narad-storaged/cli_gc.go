package main

import (
	"os"
	"runtime/debug"
)

// The produce and consume commands are short-lived processes whose live
// heap is small and bounded (the producer's buffer; a consumer's answers
// in flight), through which every record's bytes pass once: with Go's
// default a collection ran every time the heap doubled, a third of the
// consume command's CPU over 1,000,000 records of 100 bytes. cliGC lets
// the heap grow to five times what is live between collections, under a
// soft limit that brings the collections back as the heap nears it. A
// GOGC or GOMEMLIMIT in the environment is the user's, and wins.
const cliGCPercent = 400

// cliGC sets the collector for a client command whose heap stays under
// limit bytes.
func cliGC(limit int64) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(cliGCPercent)
	debug.SetMemoryLimit(limit)
}

// collectorFor sets the collector for the client command the process
// runs (cliGC): main calls it, so a test that runs a command in its own
// process keeps the test binary's settings.
func collectorFor(command string) {
	switch command {
	case "produce":
		cliGC(produceHeapLimit)
	case "consume":
		cliGC(consumeHeapLimit)
	}
}

// produceHeapLimit is the produce command's soft memory limit: the lines
// it holds and what its requests in flight copy of them.
const produceHeapLimit = 2*produceBufferBytes + 64<<20
