"""``rtxcore.hub``: not in rtxcore; importing it says why and what to do."""

from ._unbuilt import refuse_import

raise refuse_import(__name__)
