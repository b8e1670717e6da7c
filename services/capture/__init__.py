"""How a ticket comes in: capture links, the crew's form, the API's create and correct, its photos
and signature, and signing requests."""
