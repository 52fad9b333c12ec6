log("auditing", ctx.event.data.order_id);
throw new Error("audit store unreachable");
