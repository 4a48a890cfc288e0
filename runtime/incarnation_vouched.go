package runtime

import (
	"sync"

	"github.com/narad-io/storage/wire"
)

// vouchedTopics remembers, per topic, the incarnation this node's
// incarnation check last found both markers naming (checkIncarnation's
// markersVouch), so that the topic's next opens skip reading them again
// (docs/design.md, "The incarnation marker"): past the open-log budget
// every read opens a log, and the two marker reads were two of its five
// file opens.
//
// Invariants: a topic's verdict is set, used and forgotten only under the
// topic's guard (the incarnation check, a marker write, a quarantine, a
// purge, a registry open or close all run under it), so no check sees a
// directory half changed; mu guards the map across topics and is a leaf.
// A verdict is used only while the topic has a log open in the registry
// (open counts the registry's opens minus its closes): when its last log
// closes, the verdict is forgotten, so a topic none of whose logs is open
// is checked afresh on its next open, as before. It is forgotten too, before
// anything changes, by everything that writes a marker (writeMarker) or
// renames or removes the topic's directory (quarantine, purgeLocked);
// nothing else of this node writes the markers or moves the directory.
type vouchedTopics struct {
	mu     sync.Mutex
	topics map[string]*vouched
}

type vouched struct {
	incarnation wire.IncarnationID // "": none vouched for since the last forget
	open        int                // the topic's logs in the registry
}

// vouches reports whether the topic's directory was found to be
// incarnation id's by a check this node remembers.
func (v *vouchedTopics) vouches(topic string, id wire.IncarnationID) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.topics[topic]
	return e != nil && id != "" && e.incarnation == id && e.open > 0
}

// remember notes that both of the topic's markers were just read naming id.
func (v *vouchedTopics) remember(topic string, id wire.IncarnationID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.entry(topic).incarnation = id
}

// forget drops the topic's verdict: its markers or its directory are
// about to change.
func (v *vouchedTopics) forget(topic string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e := v.topics[topic]; e != nil {
		e.incarnation = ""
	}
}

// opened counts a log the registry now holds (its OnOpen).
func (v *vouchedTopics) opened(topic string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.entry(topic).open++
}

// closed counts a log the registry dropped (its OnClose); the topic's
// last one takes the verdict with it.
func (v *vouchedTopics) closed(topic string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.topics[topic]
	if e == nil {
		return
	}
	if e.open--; e.open <= 0 {
		delete(v.topics, topic)
	}
}

func (v *vouchedTopics) entry(topic string) *vouched {
	if v.topics == nil {
		v.topics = map[string]*vouched{}
	}
	e := v.topics[topic]
	if e == nil {
		e = &vouched{}
		v.topics[topic] = e
	}
	return e
}
