package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// kind is what an answer (or its absence) says a produce request did.
type kind int

const (
	committed    kind = iota // 200: committed at res.BaseOffset
	nothingDone              // the answer says nothing was done and soon may be: send again after a backoff
	notProcessed             // never reached the server's handler (not written whole, or behind an answer that closed the connection): send again at once
	redirected               // 421: another node owns the partition
	ambiguous                // sent, and nothing says whether it was committed
	failed                   // refused: nothing was kept, and sending it again would not help
)

// outcome is a produce request's outcome.
type outcome struct {
	kind  kind
	res   Produced
	err   error
	owner *url.URL // redirected: where to send it
}

// outcomeOfAnswer reads a produce answer for a batch of records records
// (its body: at most 64 KiB of it).
func (c *Client) outcomeOfAnswer(resp *http.Response, records int) outcome {
	if resp.StatusCode >= 300 {
		return c.outcomeOfError(errorOf(resp))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return outcome{kind: ambiguous, err: fmt.Errorf("narad: produce answer 200 cut short: %w", err)}
	}
	var res Produced
	if err := json.Unmarshal(body, &res); err != nil || res.Count != int64(records) {
		return outcome{kind: ambiguous, err: fmt.Errorf("narad: produce answered 200 with %q, not the API's answer for %d records", body, records)}
	}
	return outcome{kind: committed, res: res}
}

// outcomeOfError classifies a produce's error answer (docs/http-api.md,
// "Errors" and "Produce"): what says nothing was done and soon may be is
// sent again; a 421 naming an owner is followed; what does not say
// whether the batch was committed (500 internal, 503 fenced, a 5xx not
// of the API, a proxy's) is ambiguous; any other refusal fails the
// batch. A redirect is followed only to the scheme the client was made
// with, so it never takes the token off TLS.
func (c *Client) outcomeOfError(err error) outcome {
	var e *Error
	if !errors.As(err, &e) {
		return outcome{kind: ambiguous, err: err}
	}
	switch {
	case e.Status == http.StatusMisdirectedRequest && e.Owner != nil:
		if owner, perr := parseAddr(e.Owner.Addr, c.base.Scheme == "https"); perr == nil && owner.Scheme == c.base.Scheme {
			return outcome{kind: redirected, err: err, owner: owner}
		}
		return outcome{kind: failed, err: err}
	case errors.Is(e, ErrBusy), errors.Is(e, ErrUnassigned), errors.Is(e, ErrMoving), errors.Is(e, ErrCommitFailed), errors.Is(e, ErrBodyTooSlow):
		return outcome{kind: nothingDone, err: err}
	case errors.Is(e, ErrInternal), errors.Is(e, ErrFenced), strings.HasPrefix(e.Code, "http_") && e.Status >= 500:
		return outcome{kind: ambiguous, err: err}
	}
	return outcome{kind: failed, err: err}
}

// retriable says the batch may be sent again after o: always after
// nothing done, a redirect or an unprocessed request; after an ambiguous
// failure only when the caller opted in.
func (o outcome) retriable(retryAmbiguous bool) bool {
	switch o.kind {
	case nothingDone, notProcessed, redirected:
		return true
	case ambiguous:
		return retryAmbiguous
	}
	return false
}

// errOf is the error a batch settled after o fails with.
func (o outcome) errOf() error {
	if o.kind == ambiguous {
		return &batchError{kind: ErrAmbiguous, err: o.err}
	}
	return o.err
}

// isTopicGone says the answer names a topic or partition that is not
// there: the topic changed, and the producer describes it again.
func isTopicGone(err error) bool {
	return errors.Is(err, ErrTopicNotFound) || errors.Is(err, ErrPartitionNotFound)
}
