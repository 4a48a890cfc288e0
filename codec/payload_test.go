package codec

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"time"
)

// eventGenerator builds frame payloads the way the engine does: records
// [len:4 BE][record] concatenated, each record a keyed envelope
// [version 0x02][keyLen uvarint][key][committedAtUnixMs:8 BE][payload] around
// a JSON order event of about 200-400 bytes. Seeded, so every run measures
// the same bytes.
type eventGenerator struct {
	random    *rand.Rand
	orderID   int
	timestamp time.Time
}

func newEventGenerator(seed uint64) *eventGenerator {
	return &eventGenerator{
		random:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		orderID:   1_000_000 + int(seed%1000)*1000,
		timestamp: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC),
	}
}

var (
	eventProducts = []string{
		"espresso beans 1kg", "oat milk 1l", "ceramic mug", "pour-over kettle",
		"paper filters x100", "burr grinder", "cold brew bottle", "tea sampler",
		"travel tumbler", "descaling tablets", "milk frother", "gift card",
	}
	eventStatuses   = []string{"created", "paid", "packed", "shipped", "delivered", "cancelled"}
	eventCurrencies = []string{"EUR", "EUR", "EUR", "USD", "GBP", "CHF"}
	eventCountries  = []string{"DE", "FR", "NL", "IT", "ES", "AT", "BE", "PL", "SE", "GB"}
	eventPayments   = []string{"card", "paypal", "sepa", "invoice", "apple_pay"}
)

func pick(random *rand.Rand, choices []string) string {
	return choices[random.IntN(len(choices))]
}

// itemCount returns how many items an order has: 1 half the time, 2 a third,
// 3 the rest.
func itemCount(random *rand.Rand) int {
	switch n := random.IntN(100); {
	case n < 50:
		return 1
	case n < 85:
		return 2
	default:
		return 3
	}
}

func appendCents(dst []byte, cents int) []byte {
	dst = strconv.AppendInt(dst, int64(cents/100), 10)
	dst = append(dst, '.')
	if cents%100 < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(cents%100), 10)
}

// event returns one JSON order event.
func (g *eventGenerator) event() []byte {
	g.orderID += 1 + g.random.IntN(3)
	g.timestamp = g.timestamp.Add(time.Duration(g.random.IntN(2000)) * time.Millisecond)

	event := make([]byte, 0, 512)
	event = append(event, `{"order_id":"ord-`...)
	event = strconv.AppendInt(event, int64(g.orderID), 10)
	event = append(event, `","user":"user-`...)
	event = strconv.AppendInt(event, int64(g.random.IntN(50_000)), 10)
	event = append(event, `","status":"`...)
	event = append(event, pick(g.random, eventStatuses)...)
	event = append(event, `","items":[`...)
	totalCents := 0
	for item := range itemCount(g.random) {
		if item > 0 {
			event = append(event, ',')
		}
		quantity := 1 + g.random.IntN(5)
		priceCents := 199 + g.random.IntN(9800)
		totalCents += quantity * priceCents
		event = append(event, `{"sku":"SKU-`...)
		event = strconv.AppendInt(event, int64(10_000+g.random.IntN(90_000)), 10)
		event = append(event, `","name":"`...)
		event = append(event, pick(g.random, eventProducts)...)
		event = append(event, `","qty":`...)
		event = strconv.AppendInt(event, int64(quantity), 10)
		event = append(event, `,"price":`...)
		event = appendCents(event, priceCents)
		event = append(event, '}')
	}
	event = append(event, `],"total":`...)
	event = appendCents(event, totalCents)
	event = append(event, `,"currency":"`...)
	event = append(event, pick(g.random, eventCurrencies)...)
	event = append(event, `","shipping":{"country":"`...)
	event = append(event, pick(g.random, eventCountries)...)
	event = append(event, `","zip":"`...)
	event = strconv.AppendInt(event, int64(10_000+g.random.IntN(89_999)), 10)
	event = append(event, `"},"payment":"`...)
	event = append(event, pick(g.random, eventPayments)...)
	event = append(event, `","ts":"`...)
	event = g.timestamp.AppendFormat(event, "2006-01-02T15:04:05.000Z07:00")
	event = append(event, `"}`...)
	return event
}

// record returns one keyed envelope around an event.
func (g *eventGenerator) record() []byte {
	payload := g.event()
	key := "ord-" + strconv.Itoa(g.orderID)
	record := make([]byte, 0, 1+binary.MaxVarintLen64+len(key)+8+len(payload))
	record = append(record, 0x02)
	record = binary.AppendUvarint(record, uint64(len(key)))
	record = append(record, key...)
	record = binary.BigEndian.AppendUint64(record, uint64(g.timestamp.UnixMilli()))
	return append(record, payload...)
}

// framePayload returns recordCount records as one frame payload.
func (g *eventGenerator) framePayload(recordCount int) []byte {
	var payload []byte
	for range recordCount {
		record := g.record()
		payload = binary.BigEndian.AppendUint32(payload, uint32(len(record)))
		payload = append(payload, record...)
	}
	return payload
}

// randomBytes returns n bytes from a generator seeded with seed.
func randomBytes(seed uint64, n int) []byte {
	random := rand.New(rand.NewPCG(seed, seed+1))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(random.Uint32())
	}
	return data
}

// repetitiveBytes returns n bytes of a short pattern repeated.
func repetitiveBytes(n int) []byte {
	pattern := []byte(`{"level":"info","msg":"heartbeat","node":"storage-1"}` + "\n")
	data := make([]byte, n)
	for i := range data {
		data[i] = pattern[i%len(pattern)]
	}
	return data
}
