// SPDX-License-Identifier: GPL-2.0
/* The lock-free slot rings: order, bounds, and no loss or duplication under threads. */
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ring.h"

using nb::ring;
using nb::u32;

TEST(Ring, FifoAndBounds)
{
	ring r;
	ASSERT_TRUE(r.init(8));
	u32 v;
	EXPECT_FALSE(r.pop(&v));
	for (u32 i = 0; i < 8; i++)
		EXPECT_TRUE(r.push(i));
	EXPECT_FALSE(r.push(99)) << "full";
	EXPECT_EQ(r.size(), 8u);
	for (u32 i = 0; i < 8; i++) {
		ASSERT_TRUE(r.pop(&v));
		EXPECT_EQ(v, i);
	}
	EXPECT_FALSE(r.pop(&v));
	/* wraps around many times */
	for (u32 i = 0; i < 1000; i++) {
		ASSERT_TRUE(r.push(i));
		ASSERT_TRUE(r.pop(&v));
		ASSERT_EQ(v, i);
	}
	r.destroy();
}

TEST(Ring, RejectsCapacityNotAPowerOfTwo)
{
	ring r;
	EXPECT_FALSE(r.init(0));
	EXPECT_FALSE(r.init(6));
}

/*
 * Slots circulate between two threads the way they do between the receive
 * path and the worker: every slot number is taken off one ring and put on
 * the other, and at the end each is present exactly once.
 */
TEST(Ring, TwoThreadsPassSlotsWithoutLossOrDuplicates)
{
	constexpr u32 slots = 256;
	constexpr u32 rounds = 200000;
	ring free_slots, requests;
	ASSERT_TRUE(free_slots.init(slots));
	ASSERT_TRUE(requests.init(slots));
	for (u32 i = 0; i < slots; i++)
		ASSERT_TRUE(free_slots.push(i));

	std::atomic<bool> failed{false};
	std::vector<u32> seen_by_consumer(slots, 0);

	std::thread producer([&] {
		u32 v;
		for (u32 n = 0; n < rounds;) {
			if (!free_slots.pop(&v))
				continue;
			if (!requests.push(v))
				failed = true;	/* must never be full */
			n++;
		}
	});
	std::thread consumer([&] {
		u32 v;
		for (u32 n = 0; n < rounds;) {
			if (!requests.pop(&v))
				continue;
			if (v >= slots)
				failed = true;
			else
				seen_by_consumer[v]++;
			if (!free_slots.push(v))
				failed = true;
			n++;
		}
	});
	producer.join();
	consumer.join();

	EXPECT_FALSE(failed);
	u32 total = 0;
	for (u32 c : seen_by_consumer)
		total += c;
	EXPECT_EQ(total, rounds);

	std::vector<int> present(slots, 0);
	u32 v;
	while (free_slots.pop(&v))
		present[v]++;
	EXPECT_FALSE(requests.pop(&v));
	for (u32 i = 0; i < slots; i++)
		EXPECT_EQ(present[i], 1) << "slot " << i;
	free_slots.destroy();
	requests.destroy();
}

/* Several producers and consumers at once (NICs with several queues). */
TEST(Ring, ManyProducersManyConsumers)
{
	constexpr u32 per_producer = 50000;
	constexpr int producers = 3, consumers = 3;
	ring r;
	ASSERT_TRUE(r.init(64));
	std::atomic<unsigned long long> sum{0};
	std::atomic<u32> popped{0};
	std::vector<std::thread> threads;

	for (int p = 0; p < producers; p++)
		threads.emplace_back([&, p] {
			for (u32 i = 0; i < per_producer; i++)
				while (!r.push((u32)p * per_producer + i))
					;
		});
	for (int c = 0; c < consumers; c++)
		threads.emplace_back([&] {
			u32 v;
			while (popped.load() < producers * per_producer) {
				if (r.pop(&v)) {
					sum += v;
					popped++;
				}
			}
		});
	for (auto &t : threads)
		t.join();
	unsigned long long n = (unsigned long long)producers * per_producer;
	EXPECT_EQ(sum.load(), n * (n - 1) / 2);
	r.destroy();
}
