package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/narad-io/storage/api"
	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/runtime"
)

// trainDictionary answers POST /v1/topics/{topic}/dictionary: train a
// dictionary on the topic's newest records on this node and make it the one
// new frames use (runtime.Node.TrainDictionary).
func (a *Handler) trainDictionary(w http.ResponseWriter, r *http.Request) {
	name, ok := topicOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	var body api.DictionaryRequest
	if err := decodeJSON(r, &body); err != nil {
		a.badBody(w, err)
		return
	}
	training := runtime.DictionaryTraining{}
	if body.Samples != nil {
		if *body.Samples < codec.MinTrainingSamples || *body.Samples > runtime.MaxDictionarySamples {
			writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("samples must be from %d to %d, not %d", codec.MinTrainingSamples, runtime.MaxDictionarySamples, *body.Samples))
			return
		}
		training.Samples = *body.Samples
	}
	if body.MaxBytes != nil {
		if *body.MaxBytes < 1<<10 || *body.MaxBytes > codec.MaxDictionaryBytes {
			writeError(w, http.StatusBadRequest, api.CodeInvalidBody, fmt.Sprintf("max_bytes must be from %d to %d, not %d", 1<<10, codec.MaxDictionaryBytes, *body.MaxBytes))
			return
		}
		training.MaxBytes = *body.MaxBytes
	}
	info, err := a.node.TrainDictionary(r.Context(), name, training)
	switch {
	case errors.Is(err, codec.ErrBadDictionary):
		writeError(w, http.StatusConflict, api.CodeDictionaryRefused, "no dictionary could be trained from the topic's newest records on this node (too few, or nothing repeats across them): "+err.Error())
		return
	case errors.Is(err, runtime.ErrTooManyDictionaries):
		writeError(w, http.StatusConflict, api.CodeDictionaryRefused, fmt.Sprintf("the topic holds %d dictionaries on this node, the most it may; each is kept while the topic lives", runtime.MaxTopicDictionaries))
		return
	case err != nil:
		a.writeNodeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Dictionary{ID: info.ID, Bytes: info.Bytes, TrainedAtMs: info.TrainedAtMs, Samples: info.Samples, Current: true})
}

// listDictionaries answers GET /v1/topics/{topic}/dictionaries.
func (a *Handler) listDictionaries(w http.ResponseWriter, r *http.Request) {
	name, ok := topicOf(w, r)
	if !ok {
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	infos, err := a.node.Dictionaries(r.Context(), name)
	if err != nil {
		a.writeNodeError(w, r, err)
		return
	}
	out := api.DictionaryList{Dictionaries: make([]api.Dictionary, 0, len(infos))}
	for i, info := range infos {
		out.Dictionaries = append(out.Dictionaries, api.Dictionary{ID: info.ID, Bytes: info.Bytes, TrainedAtMs: info.TrainedAtMs, Current: i == 0})
	}
	writeJSON(w, http.StatusOK, out)
}
