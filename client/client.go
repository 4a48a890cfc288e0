package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/narad-io/storage/api"
)

// Options configure a Client. The zero value is a client without a token,
// over plain HTTP or the system's trusted roots.
type Options struct {
	// Token is the bearer token of a daemon started with
	// --auth-token-file.
	Token string
	// TLSConfig is the TLS configuration of https addresses (a private
	// CA's pool in RootCAs, for one); nil is the system's defaults.
	TLSConfig *tls.Config
	// HTTPClient, if set, makes every request instead of the client's own
	// (TLSConfig is then the caller's to set on it).
	HTTPClient *http.Client
	// Retries is how many times a request is sent again, with backoff
	// from 50 ms (or the server's Retry-After), when the answer says
	// nothing was done and soon may be: 503 busy (no open-log slot or
	// descriptor free), 503 unassigned (the partition has no owner yet)
	// and 503 moving (a move froze the partition) for any request, 503
	// commit_failed for a produce (counted apart from the others). 0 is
	// 3, a negative value none.
	Retries int
}

// Client talks to one daemon, or to a cluster through one of its nodes.
// It is safe for concurrent use.
//
// A node of a cluster answers a call for a partition another node owns
// with 421 and the owner's address; the client sends the call again to
// the owner (up to maxRedirects hops, as a move may have taken the
// partition on), and sends the partition's later calls straight to the
// owner it learned. A call to a remembered owner that cannot be reached
// forgets it: the next call asks the node the client was made with.
type Client struct {
	base    *url.URL
	token   string
	http    *http.Client
	retries int
	owners  sync.Map // "topic/partition" (as in the path) -> *url.URL of its owner
	// tls is the TLS configuration of https addresses (Options.TLSConfig)
	// and ownHTTP says http is the client's own transport, not the
	// caller's: a Producer then opens connections of its own (pipelined,
	// producer_link.go) with it.
	tls     *tls.Config
	ownHTTP bool
}

// maxRedirects bounds the 421 answers one call follows.
const maxRedirects = 3

// New returns a client of the daemon at addr: a URL (http://host:port,
// https://host:port) or host:port, taken as http, or as https when
// opts.TLSConfig is set.
func New(addr string, opts Options) (*Client, error) {
	base, err := parseAddr(addr, opts.TLSConfig != nil)
	if err != nil {
		return nil, err
	}
	hc, own := opts.HTTPClient, opts.HTTPClient == nil
	if own {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = opts.TLSConfig
		tr.MaxIdleConnsPerHost = 32 // keep-alive: a connection per concurrent call, reused
		hc = &http.Client{Transport: tr}
	}
	retries := opts.Retries
	switch {
	case retries == 0:
		retries = 3
	case retries < 0:
		retries = 0
	}
	return &Client{base: base, token: opts.Token, http: hc, retries: retries, tls: opts.TLSConfig, ownHTTP: own}, nil
}

// parseAddr reads a daemon's address: a URL with a scheme, or host:port.
func parseAddr(addr string, tlsOn bool) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		scheme := "http"
		if tlsOn {
			scheme = "https"
		}
		addr = scheme + "://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("narad: address %q: want host:port, http://host:port or https://host:port", addr)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

// request is one call: its method, path (escaped by the caller), query,
// body and content type, and the header to send.
type request struct {
	method      string
	path        string
	query       url.Values
	body        []byte
	contentType string
	accept      string
	// node, if set, is the node to ask instead of the client's own: a
	// topic-wide call meant for one owner of a cluster.
	node *url.URL
}

// do sends req and returns the answer when it is a success; an error
// answer is an *Error. It sends a partition's call to the partition's
// owner when it knows it, follows 421 answers to the owner they name, and
// sends req again after a backoff while the answer says nothing was done
// and soon may be (503 busy, unassigned, moving), up to the client's retries.
func (c *Client) do(ctx context.Context, req request) (*http.Response, error) {
	part, scoped := partitionOf(req.path)
	base := c.base
	if req.node != nil {
		base = req.node
	} else if scoped {
		if u, ok := c.owners.Load(part); ok {
			base = u.(*url.URL)
		}
	}
	hops := 0
	for attempt := 0; ; {
		resp, err := c.send(ctx, base, req)
		var e *Error
		isAnswer := errors.As(err, &e)
		if isAnswer && e.Status == http.StatusMisdirectedRequest && e.Owner != nil && hops < maxRedirects {
			// Only to the scheme the client was made with: a redirect never
			// takes the token off TLS.
			if owner, perr := parseAddr(e.Owner.Addr, c.base.Scheme == "https"); perr == nil && owner.Scheme == c.base.Scheme {
				hops++
				base = owner
				if scoped {
					c.owners.Store(part, owner)
				}
				continue
			}
		}
		if err != nil && (!isAnswer || errors.Is(err, ErrFenced)) && base != c.base && scoped && ctx.Err() == nil {
			c.owners.CompareAndDelete(part, base) // unreachable or fenced: ask the node given again next time
		}
		if !(errors.Is(err, ErrBusy) || errors.Is(err, ErrUnassigned) || errors.Is(err, ErrMoving)) || attempt >= c.retries {
			return resp, err
		}
		if err := backoff(ctx, attempt, err); err != nil {
			return nil, err
		}
		attempt++
	}
}

// partitionOf names the partition a path is a call for ("topic/p", the
// topic as escaped in the path): /v1/topics/{topic}/partitions/{p}/...
// and /v1/topics/{topic}/cursors/{name}/partitions/{p}/...
func partitionOf(path string) (string, bool) {
	segs := strings.Split(path, "/")
	if len(segs) < 6 || segs[0] != "" || segs[1] != "v1" || segs[2] != "topics" {
		return "", false
	}
	switch {
	case segs[4] == "partitions":
		return segs[3] + "/" + segs[5], true
	case segs[4] == "cursors" && len(segs) >= 8 && segs[6] == "partitions":
		return segs[3] + "/" + segs[7], true
	}
	return "", false
}

// send sends req once, to the node at base.
func (c *Client) send(ctx context.Context, base *url.URL, req request) (*http.Response, error) {
	u := *base
	u.Path += req.path
	u.RawQuery = req.query.Encode()
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), bytes.NewReader(req.body))
	if err != nil {
		return nil, err
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	if req.accept != "" {
		hr.Header.Set("Accept", req.accept)
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer drain(resp)
	return nil, errorOf(resp)
}

// errorOf reads an error answer.
func errorOf(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	var body api.ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.StartOffset, e.NextOffset = body.Error.Code, body.Error.Message, body.StartOffset, body.NextOffset
		e.Owner = body.Owner
	} else {
		e.Code, e.Message = "http_"+strconv.Itoa(resp.StatusCode), strings.TrimSpace(string(b))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// drain reads what is left of a body and closes it, so the connection is
// reused.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// doJSON sends a JSON body (nil for none) and decodes a JSON answer into
// out (nil to discard it).
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	req := request{method: method, path: path}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		req.body, req.contentType = b, "application/json"
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("narad: %s %s: the answer is not the API's JSON: %w", method, path, err)
	}
	return nil
}

// backoff waits before retry n (0, 1, ...), as long as retryWait says.
func backoff(ctx context.Context, n int, err error) error {
	t := time.NewTimer(retryWait(n, err))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryWait is how long to wait before retry n (0, 1, ...) after err:
// the server's Retry-After if it gave one, else 50 ms doubling, capped at
// 2 s.
func retryWait(n int, err error) time.Duration {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return e.RetryAfter
	}
	return min(50*time.Millisecond<<min(n, 16), 2*time.Second)
}

// nodeAt is the node at addr, as a cluster names its nodes: "" is the
// client's own; another scheme than the client's is refused, so the
// token never leaves TLS.
func (c *Client) nodeAt(addr string) (*url.URL, error) {
	if addr == "" {
		return nil, nil
	}
	u, err := parseAddr(addr, c.base.Scheme == "https")
	if err != nil {
		return nil, err
	}
	if u.Scheme != c.base.Scheme {
		return nil, fmt.Errorf("narad: node %s: not over %s, as the client is", addr, c.base.Scheme)
	}
	return u, nil
}

func topicPath(topic string) string { return "/v1/topics/" + url.PathEscape(topic) }

func partitionPath(topic string, p int) string {
	return topicPath(topic) + "/partitions/" + strconv.Itoa(p)
}
