#!/usr/bin/python3
"""Golden vectors for parity::DistributedSampler and parity::torch_cpu_randperm.

Run with the real PyTorch (Debian's python3-torch 1.13.1):
    /usr/bin/python3 scripts/gen_sampler_vectors.py > /tmp/sampler_vectors.inc
and paste the two tables into tests/common/distributed_sampler_test.cpp.

Each row is a C++ aggregate initializer. The checksum of a list is
    sum over i of (i + 1) * list[i]  (mod 2**61)
which the test recomputes in C++ (see list_checksum there).
"""
import torch
from torch.utils.data.distributed import DistributedSampler

CHECKSUM_MOD = 2 ** 61
NUM_HEAD = 16


def checksum(values):
    return sum((i + 1) * v for i, v in enumerate(values)) % CHECKSUM_MOD


def cpp_list(values):
    return "{" + ", ".join(str(v) for v in values) + "}"


def sampler_rows():
    for n in (10, 11, 60000):
        for num_replicas in (1, 3, 8):
            for shuffle in (True, False):
                for drop_last in (False, True):
                    seeds = (0, 42) if shuffle else (0,)
                    epochs = (0, 1) if shuffle else (0,)
                    for seed in seeds:
                        for epoch in epochs:
                            yield sampler_row(n, num_replicas, shuffle, drop_last, seed, epoch)


def sampler_row(n, num_replicas, shuffle, drop_last, seed, epoch):
    dataset = range(n)  # DistributedSampler only needs len(dataset)
    per_rank = []
    for rank in range(num_replicas):
        sampler = DistributedSampler(dataset, num_replicas=num_replicas, rank=rank,
                                     shuffle=shuffle, seed=seed, drop_last=drop_last)
        sampler.set_epoch(epoch)
        per_rank.append(list(sampler))
    sampler = DistributedSampler(dataset, num_replicas=num_replicas, rank=0,
                                 shuffle=shuffle, seed=seed, drop_last=drop_last)
    return "  {%d, %d, %s, %s, %d, %d, %d, %d, %s, %s, %s}," % (
        n, num_replicas, str(shuffle).lower(), str(drop_last).lower(), seed, epoch,
        sampler.num_samples, sampler.total_size,
        cpp_list(per_rank[0][:NUM_HEAD]), cpp_list(per_rank[-1][:NUM_HEAD]),
        cpp_list(checksum(indices) for indices in per_rank))


def randperm_rows():
    # 2**32 + 42 shows that only the low 32 bits of the seed reach mt19937.
    for n in (0, 1, 2, 7, 10, 100, 60000):
        for seed in (0, 1, 42, 2 ** 32 + 42, 2 ** 64 - 1):
            g = torch.Generator()
            g.manual_seed(seed)
            perm = torch.randperm(n, generator=g).tolist()
            yield "  {%d, %duLL, %s, %d}," % (n, seed, cpp_list(perm[:NUM_HEAD]), checksum(perm))


def main():
    print("// torch %s: %s" % (torch.__version__, "scripts/gen_sampler_vectors.py"))
    print("// n, num_replicas, shuffle, drop_last, seed, epoch, num_samples, total_size,")
    print("// rank 0 head, last rank head, checksum per rank")
    for row in sampler_rows():
        print(row)
    print("// n, seed, head, checksum")
    for row in randperm_rows():
        print(row)


if __name__ == "__main__":
    main()
