"""Review: the PM's queue, the ticket page's choices, and bulk approval."""
