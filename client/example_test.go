package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/tidekv/tidekv/client"
)

// The examples run against a one-node cluster started inside the test
// binary (main_test.go); addrs() is its address. In a program, Addrs lists
// one or more nodes' gRPC addresses, e.g. "10.0.0.1:7400": the client finds
// the rest of the cluster from them.

// Connect to a cluster, write a key and read it back.
func Example() {
	cl, err := client.New(client.Config{Addrs: addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	// Every call takes a context; its deadline bounds the call's retries.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if err := cl.Put(ctx, []byte("greeting"), []byte("hello")); err != nil {
		log.Fatal(err)
	}
	v, err := cl.Get(ctx, []byte("greeting"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", v)
	// Output: hello
}

// Scan reads the keys of [start, end) in order. To scan a prefix, end it
// at the prefix with its last byte plus one ("user/" → "user0").
func ExampleClient_Scan() {
	cl, err := client.New(client.Config{Addrs: addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	for _, name := range []string{"carol", "alice", "bob"} {
		if err := cl.Put(ctx, []byte("user/"+name), []byte(name+"@example.com")); err != nil {
			log.Fatal(err)
		}
	}
	kvs, err := cl.Scan(ctx, []byte("user/"), []byte("user0"), 0) // limit 0: every key
	if err != nil {
		log.Fatal(err)
	}
	for _, kv := range kvs {
		fmt.Printf("%s = %s\n", kv.Key, kv.Value)
	}
	// Output:
	// user/alice = alice@example.com
	// user/bob = bob@example.com
	// user/carol = carol@example.com
}

// Get fails with an error that wraps ErrNotFound when the key has no value;
// test for it, and for the client's other errors, with errors.Is.
func ExampleErrNotFound() {
	cl, err := client.New(client.Config{Addrs: addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	_, err = cl.Get(context.Background(), []byte("no-such-key"))
	switch {
	case errors.Is(err, client.ErrNotFound):
		fmt.Println("not found")
	case err != nil:
		log.Fatal(err) // e.g. ErrUnavailable after every retry failed
	}
	// Output: not found
}

// ReadAt reads the data as it was at a timestamp of the cluster's clock,
// such as Client.Now returns.
func ExampleReadAt() {
	cl, err := client.New(client.Config{Addrs: addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	if err := cl.Put(ctx, []byte("config/mode"), []byte("blue")); err != nil {
		log.Fatal(err)
	}
	before := cl.Now() // after the first write
	if err := cl.Put(ctx, []byte("config/mode"), []byte("green")); err != nil {
		log.Fatal(err)
	}

	now, err := cl.Get(ctx, []byte("config/mode"))
	if err != nil {
		log.Fatal(err)
	}
	then, err := cl.Get(ctx, []byte("config/mode"), client.ReadAt(before))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("now %s, before %s\n", now, then)
	// Output: now green, before blue
}

// FollowerReadAt is a read at a timestamp that any replica may serve once
// it has every write up to that timestamp, so it spreads reads over the
// replicas and still sees the same data as the leaseholder would. (A
// Bounded(θ) read is cheaper still but may miss writes of the last θ.)
func ExampleFollowerReadAt() {
	cl, err := client.New(client.Config{Addrs: addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	if err := cl.Put(ctx, []byte("catalog/item42"), []byte("teapot")); err != nil {
		log.Fatal(err)
	}
	ts := cl.Now() // after the write: the read is sure to see it
	v, err := cl.Get(ctx, []byte("catalog/item42"), client.FollowerReadAt(ts))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", v)
	// Output: teapot
}

// Txn runs a serializable transaction over any keys. When it meets a
// conflict, Txn rolls it back and runs the function again, so the function
// must have no effects outside tx; an error it returns rolls the
// transaction back and comes out of Txn.
func ExampleClient_Txn() {
	cl, err := client.New(client.Config{Addrs: addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	for key, balance := range map[string]string{"account/alice": "100", "account/bob": "20"} {
		if err := cl.Put(ctx, []byte(key), []byte(balance)); err != nil {
			log.Fatal(err)
		}
	}
	balance := func(tx *client.Tx, key string) (int, error) {
		v, err := tx.Get(ctx, []byte(key))
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(string(v))
	}
	errInsufficient := errors.New("insufficient funds")
	transfer := func(from, to string, amount int) error {
		return cl.Txn(ctx, func(tx *client.Tx) error {
			a, err := balance(tx, from)
			if err != nil {
				return err
			}
			b, err := balance(tx, to)
			if err != nil {
				return err
			}
			if a < amount {
				return errInsufficient
			}
			if err := tx.Put(ctx, []byte(from), []byte(strconv.Itoa(a-amount))); err != nil {
				return err
			}
			return tx.Put(ctx, []byte(to), []byte(strconv.Itoa(b+amount)))
		})
	}

	fmt.Println(transfer("account/alice", "account/bob", 30))
	fmt.Println(transfer("account/bob", "account/alice", 500))
	kvs, err := cl.Scan(ctx, []byte("account/"), []byte("account0"), 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, kv := range kvs {
		fmt.Printf("%s = %s\n", kv.Key, kv.Value)
	}
	// Output:
	// <nil>
	// insufficient funds
	// account/alice = 70
	// account/bob = 50
}

// TxnIf runs a one-shot transaction in one round trip: if every compare
// holds, the then branch, otherwise the else branch. Here: take a lock
// only if nobody holds it, and otherwise learn who does.
func ExampleClient_TxnIf() {
	cl, err := client.New(client.Config{Addrs: addrs()})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	lock := []byte("lock/report")
	acquire := func(owner string) {
		res, err := cl.TxnIf(ctx,
			[]client.Compare{{Key: lock, Op: client.NotExists}},
			client.Branch{Ops: []client.Op{{Key: lock, Value: []byte(owner)}}},
			client.Branch{Reads: [][]byte{lock}},
		)
		if err != nil {
			log.Fatal(err)
		}
		if res.Succeeded {
			fmt.Printf("%s took the lock\n", owner)
		} else {
			fmt.Printf("%s: held by %s\n", owner, res.Reads[0].Value)
		}
	}
	acquire("worker-1")
	acquire("worker-2")

	// Release it: a plain delete.
	if _, err := cl.Delete(ctx, lock); err != nil {
		log.Fatal(err)
	}
	// Output:
	// worker-1 took the lock
	// worker-2: held by worker-1
}
