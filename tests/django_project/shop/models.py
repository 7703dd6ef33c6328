from django.db import models


class Thing(models.Model):
    """A row the tasks write and read, to show they reach the database."""

    name = models.CharField(max_length=100)
    made_by = models.CharField(max_length=100, default="")
