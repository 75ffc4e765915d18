"""The distributed herder, as Kafka Connect's ``runtime.distributed`` package: the
herder loop, group membership, the assignor, the leader's duties and KIP-618 fencing."""
