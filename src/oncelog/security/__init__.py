"""Security cores: principals, SASL credentials and the ACL model.

Pure code (no sockets, no clock, no broker): the broker's shells feed it.
"""
