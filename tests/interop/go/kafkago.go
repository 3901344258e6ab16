package main

// segmentio/kafka-go: Writer.WriteMessages with a context, Reader on explicit
// partitions and Reader in a consumer group.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// partitionByKey sends each message to the partition the records file names for
// its key (keys are unique); kafka-go's Writer ignores Message.Partition.
type partitionByKey struct{ partitions sync.Map }

func (b *partitionByKey) Balance(msg kafka.Message, _ ...int) int {
	p, ok := b.partitions.Load(string(msg.Key))
	if !ok {
		panic(fmt.Sprintf("no partition for key %x", msg.Key))
	}
	return int(p.(int32))
}

type kafkaGoProducer struct {
	w        *kafka.Writer
	balancer *partitionByKey
}

func newKafkaGoProducer(o options) producer {
	b := &partitionByKey{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(o.bootstrap...),
		Topic:        o.topic,
		Balancer:     b,
		RequiredAcks: kafka.RequireAll,
		BatchSize:    o.batch,
		BatchTimeout: 2 * time.Millisecond,
		BatchBytes:   8 << 20,
	}
	return &kafkaGoProducer{w: w, balancer: b}
}

func (p *kafkaGoProducer) send(ctx context.Context, batch []Record) []sent {
	msgs := make([]kafka.Message, len(batch))
	for i, r := range batch {
		p.balancer.partitions.Store(string(r.Key), r.Partition)
		msgs[i] = kafka.Message{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h.Name, Value: h.Value})
		}
	}
	err := p.w.WriteMessages(ctx, msgs...)
	out := make([]sent, len(batch))
	var perMessage kafka.WriteErrors
	isPer := errors.As(err, &perMessage) && len(perMessage) == len(batch)
	for i, r := range batch {
		out[i] = sent{status: acked, partition: r.Partition, offset: -1}
		e := err
		if isPer {
			e = perMessage[i]
		}
		if e != nil {
			out[i].status, out[i].err = unknown, e
		}
	}
	return out
}

func (p *kafkaGoProducer) close() {
	if err := p.w.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "kafka-go writer close: %v\n", err)
	}
}

type kafkaGoConsumer struct {
	readers []*kafka.Reader
}

func newKafkaGoConsumer(o options, group bool) consumer {
	base := kafka.ReaderConfig{
		Brokers:  o.bootstrap,
		Topic:    o.topic,
		MinBytes: 1,
		MaxBytes: 16 << 20,
		MaxWait:  200 * time.Millisecond,
	}
	c := &kafkaGoConsumer{}
	if group {
		base.GroupID = o.group
		base.StartOffset = kafka.FirstOffset
		c.readers = append(c.readers, kafka.NewReader(base))
		return c
	}
	for p := 0; p < o.partitions; p++ {
		cfg := base
		cfg.Partition = p
		r := kafka.NewReader(cfg)
		if err := r.SetOffset(kafka.FirstOffset); err != nil {
			panic(err)
		}
		c.readers = append(c.readers, r)
	}
	return c
}

func (c *kafkaGoConsumer) run(ctx context.Context, sink func(Record)) error {
	errs := make(chan error, len(c.readers))
	for _, r := range c.readers {
		go func(r *kafka.Reader) {
			for {
				// With a GroupID, ReadMessage commits what it returns.
				m, err := r.ReadMessage(ctx)
				if err != nil {
					if ctx.Err() != nil {
						err = nil
					}
					errs <- err
					return
				}
				rec := Record{Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Value: m.Value}
				for _, h := range m.Headers {
					rec.Headers = append(rec.Headers, Header{Name: h.Key, Value: h.Value})
				}
				sink(rec)
			}
		}(r)
	}
	for range c.readers {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

func (c *kafkaGoConsumer) close() {
	for _, r := range c.readers {
		if err := r.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "kafka-go reader close: %v\n", err)
		}
	}
}
