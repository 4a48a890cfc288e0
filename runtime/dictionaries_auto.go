package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Automatic training (docs/design.md, "Dictionaries"): a topic whose record
// sets DictionaryAfter has a dictionary trained by each node once that many
// of its records were produced there and the node holds none for it.

const (
	// MinDictionaryAfter and MaxDictionaryAfter bound a topic's
	// DictionaryAfter (besides 0, off): fewer records than a default
	// training reads would train on less than it asks for.
	MinDictionaryAfter = DefaultDictionarySamples
	MaxDictionaryAfter = 1 << 40
	// autoCheckEvery is how many records a topic's producers add between
	// two looks at its record: a produce only adds to a counter.
	autoCheckEvery = 256
)

// ErrBadDictionaryAfter: a DictionaryAfter out of its bounds.
var ErrBadDictionaryAfter = errors.New("runtime: dictionary_after out of bounds")

// autoTraining is one topic's count of records produced on this node
// since it started, and where its automatic training stands.
//
// INVARIANT: at most one training of the topic runs at a time (running);
// once one succeeded, or the topic was found holding a dictionary, done
// is set and nothing more is counted or looked at.
type autoTraining struct {
	seen    atomic.Int64
	nextTry atomic.Int64 // after a failed training: the count to try again at
	running atomic.Bool
	done    atomic.Bool
}

// autoTrainings are the topics' counts, by name. The zero value is ready.
type autoTrainings struct {
	byTopic sync.Map // string -> *autoTraining
}

func (a *autoTrainings) of(topic string) *autoTraining {
	if t, ok := a.byTopic.Load(topic); ok {
		return t.(*autoTraining)
	}
	t, _ := a.byTopic.LoadOrStore(topic, &autoTraining{})
	return t.(*autoTraining)
}

// forget drops a topic's count: it was deleted.
func (a *autoTrainings) forget(topic string) { a.byTopic.Delete(topic) }

// SetDictionaryAfter sets the topic's DictionaryAfter: 0 (off) or from
// MinDictionaryAfter to MaxDictionaryAfter records, else
// ErrBadDictionaryAfter.
func (n *Node) SetDictionaryAfter(ctx context.Context, topic string, records int64) (TopicRecord, error) {
	if records != 0 && (records < MinDictionaryAfter || records > MaxDictionaryAfter) {
		return TopicRecord{}, fmt.Errorf("%w: %d (0, or %d to %d)", ErrBadDictionaryAfter, records, MinDictionaryAfter, int64(MaxDictionaryAfter))
	}
	return n.ms.SetDictionaryAfter(ctx, topic, records)
}

// countForDictionary adds a commit's records to the topic's count and, each
// autoCheckEvery records, looks whether the topic asks for a dictionary
// now; if so it trains one in the background. It costs a produce an
// atomic add.
func (n *Node) countForDictionary(topic string, records int) {
	a := n.autoTrainings.of(topic)
	if a.done.Load() {
		return
	}
	after := a.seen.Add(int64(records))
	if before := after - int64(records); before/autoCheckEvery == after/autoCheckEvery || after < a.nextTry.Load() {
		return
	}
	rec, ok, err := n.ms.Topic(n.backgroundCtx, topic)
	if err != nil || !ok || rec.DictionaryAfter <= 0 || after < rec.DictionaryAfter {
		return
	}
	if n.topicHasDictionary(rec) {
		a.done.Store(true)
		return
	}
	if !a.running.CompareAndSwap(false, true) {
		return
	}
	n.lifecycle.Lock() // so no training starts once Close waits for them
	defer n.lifecycle.Unlock()
	if n.closed.Load() {
		a.running.Store(false)
		return
	}
	n.background.Add(1)
	go func() {
		defer n.background.Done()
		defer a.running.Store(false)
		info, err := n.trainDictionary(n.backgroundCtx, topic, DictionaryTraining{})
		n.countTraining(trainingAutomatic, err)
		if err != nil {
			a.nextTry.Store(2 * after) // not at every look: a training reads thousands of records
			n.logger.Warn("automatic dictionary training failed; trying again later", zap.String("topic", topic),
				zap.Int64("records_seen", after), zap.Int64("next_try_at", 2*after), zap.Error(err))
			return
		}
		a.done.Store(true)
		n.logger.Info("trained a dictionary automatically", zap.String("topic", topic), zap.Uint32("id", info.ID), zap.Int64("records_seen", after))
	}()
}

// topicHasDictionary reports whether the topic's loaded set, for the
// record's incarnation, has a current dictionary.
func (n *Node) topicHasDictionary(rec TopicRecord) bool {
	td := &n.dictionaries
	td.mu.Lock()
	defer td.mu.Unlock()
	loaded, ok := td.topics[rec.Name]
	return ok && loaded.incarnation == rec.Incarnation && loaded.set.Current() != nil
}
