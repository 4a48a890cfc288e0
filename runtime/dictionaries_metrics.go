package runtime

import (
	"errors"
	"sync"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/internal/promshare"
	"github.com/prometheus/client_golang/prometheus"
)

// dictionaryMetrics count the node's dictionary trainings (docs/metrics.md,
// "Dictionaries"), registered on the first one.
type dictionaryMetrics struct {
	once      sync.Once
	trainings *prometheus.CounterVec
}

// Labels of narad_dictionary_trainings_total.
const (
	trainingOnRequest = "request"
	trainingAutomatic = "automatic"
)

// countTraining counts one training by what started it and how it ended:
// trained, refused (nothing could be trained, or the topic holds its most)
// or failed (the node's or the disk's error).
func (n *Node) countTraining(trigger string, err error) {
	m := &n.dictionaryMetrics
	m.once.Do(func() {
		m.trainings = promshare.Register(n.promReg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "narad_dictionary_trainings_total",
			Help: "Dictionary trainings of topics, by what started them (request, automatic) and their result (trained, refused, failed).",
		}, []string{"trigger", "result"}))
	})
	result := "trained"
	switch {
	case errors.Is(err, codec.ErrBadDictionary), errors.Is(err, ErrTooManyDictionaries):
		result = "refused"
	case err != nil:
		result = "failed"
	}
	m.trainings.WithLabelValues(trigger, result).Inc()
}
