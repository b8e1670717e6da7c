"""Tickets as stored and shown: records, shapes, views, queries, plain words, signatures, exports and
the ticket's document."""
