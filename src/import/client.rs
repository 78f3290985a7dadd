//! `gymapi import`: the migration client.
