package main

// twmb/franz-go (kgo): an idempotent producer (its default) with acks=all, and a
// consumer on explicit partitions or in a group.

import (
	"context"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
)

type franzProducer struct{ cl *kgo.Client }

func newFranzProducer(o options) (producer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(o.bootstrap...),
		kgo.DefaultProduceTopic(o.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(4<<20),
	)
	if err != nil {
		return nil, err
	}
	return &franzProducer{cl: cl}, nil
}

func (p *franzProducer) send(ctx context.Context, batch []Record) []sent {
	recs := make([]*kgo.Record, len(batch))
	for i, r := range batch {
		recs[i] = &kgo.Record{Partition: r.Partition, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			recs[i].Headers = append(recs[i].Headers, kgo.RecordHeader{Key: h.Name, Value: h.Value})
		}
	}
	// ProduceSync lists results in completion order, not in argument order.
	index := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		index[r] = i
	}
	out := make([]sent, len(batch))
	for _, res := range p.cl.ProduceSync(ctx, recs...) {
		i := index[res.Record]
		out[i] = sent{status: acked, partition: res.Record.Partition, offset: res.Record.Offset}
		if res.Err != nil {
			out[i] = sent{status: unknown, partition: batch[i].Partition, offset: -1, err: res.Err}
		}
	}
	return out
}

func (p *franzProducer) close() { p.cl.Close() }

type franzConsumer struct{ cl *kgo.Client }

func newFranzConsumer(o options, group bool) (consumer, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(o.bootstrap...), kgo.FetchMaxBytes(16 << 20)}
	if group {
		opts = append(opts,
			kgo.ConsumerGroup(o.group),
			kgo.ConsumeTopics(o.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		)
	} else {
		parts := map[int32]kgo.Offset{}
		for p := 0; p < o.partitions; p++ {
			parts[int32(p)] = kgo.NewOffset().AtStart()
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: parts}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &franzConsumer{cl: cl}, nil
}

func (c *franzConsumer) run(ctx context.Context, sink func(Record)) error {
	for ctx.Err() == nil {
		fetches := c.cl.PollFetches(ctx)
		if fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "franz-go fetch %s/%d: %v\n", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			rec := Record{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, Header{Name: h.Key, Value: h.Value})
			}
			sink(rec)
		})
	}
	return nil
}

func (c *franzConsumer) close() { c.cl.Close() }
