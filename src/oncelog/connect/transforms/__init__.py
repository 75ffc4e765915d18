"""Single Message Transforms and predicates (Kafka's ``connect-transforms``)."""

from oncelog.connect.api.transforms import KeyOrValue, Predicate, Transformation
from oncelog.connect.transforms.extract_field import ExtractFieldKey, ExtractFieldValue
from oncelog.connect.transforms.filter import Filter
from oncelog.connect.transforms.insert_field import InsertFieldKey, InsertFieldValue
from oncelog.connect.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from oncelog.connect.transforms.replace_field import ReplaceFieldKey, ReplaceFieldValue
from oncelog.connect.transforms.routers import RegexRouter, TimestampRouter
from oncelog.connect.transforms.value_to_key import ValueToKey

__all__ = [
    "ExtractFieldKey",
    "ExtractFieldValue",
    "Filter",
    "HasHeaderKey",
    "InsertFieldKey",
    "InsertFieldValue",
    "KeyOrValue",
    "Predicate",
    "RecordIsTombstone",
    "RegexRouter",
    "ReplaceFieldKey",
    "ReplaceFieldValue",
    "TimestampRouter",
    "TopicNameMatches",
    "Transformation",
    "ValueToKey",
]
