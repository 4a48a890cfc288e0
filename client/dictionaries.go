package client

import (
	"context"
	"net/http"

	"github.com/narad-io/storage/api"
)

// Dictionary describes one zstd dictionary of a topic on the node asked.
type Dictionary = api.Dictionary

// DictionaryTraining says how to train a dictionary: 0 takes the daemon's
// default (2,000 samples, 64 KiB).
type DictionaryTraining struct {
	Samples  int
	MaxBytes int
}

// TrainDictionary has the node train a zstd dictionary on the topic's
// newest records it holds and compress the topic's new frames with it.
// Too few records, or a topic holding the most dictionaries it may, is
// ErrDictionaryRefused.
func (c *Client) TrainDictionary(ctx context.Context, topic string, training DictionaryTraining) (Dictionary, error) {
	var body api.DictionaryRequest
	if training.Samples != 0 {
		body.Samples = &training.Samples
	}
	if training.MaxBytes != 0 {
		body.MaxBytes = &training.MaxBytes
	}
	var d Dictionary
	return d, c.doJSON(ctx, http.MethodPost, topicPath(topic)+"/dictionary", body, &d)
}

// Dictionaries lists the topic's dictionaries on the node asked, the one
// new frames use first.
func (c *Client) Dictionaries(ctx context.Context, topic string) ([]Dictionary, error) {
	var out api.DictionaryList
	return out.Dictionaries, c.doJSON(ctx, http.MethodGet, topicPath(topic)+"/dictionaries", nil, &out)
}

// SetDictionaryAfter sets the topic's automatic dictionary option: each
// node trains the topic a dictionary by itself once records records were
// produced there and it holds none; 0 turns it off.
func (c *Client) SetDictionaryAfter(ctx context.Context, topic string, records int64) (Topic, error) {
	var t Topic
	return t, c.doJSON(ctx, http.MethodPatch, topicPath(topic), api.TopicRequest{DictionaryAfter: &records}, &t)
}
